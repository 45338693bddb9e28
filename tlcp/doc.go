// Package tlcp implements TLCP 1.1, the transport layer cryptography
// protocol of GB/T 38636-2020 ("GM-TLS"), with SM2 dual certificates, SM3
// and SM4.
//
// The API follows crypto/tls: a Config, Server and Client wrapping a
// net.Conn, Listen, NewListener, Dial and DialWithDialer, a Conn with Read,
// Write, Close, CloseWrite, Handshake, HandshakeContext, ConnectionState and
// deadlines. An identity is a Certificate: a signing certificate and an
// encryption certificate, each with its chain and its key. Private keys are
// reached only through crypto.Signer and crypto.Decrypter (see Certificate
// for the exact calls), so keys held by a crypto card plug in without this
// package knowing. It must not learn about key backends, configuration files
// or metrics; errors that end a handshake carry the alert (*AlertError) so
// that callers can label them.
//
// # Suites
//
// ECC_SM4_GCM_SM3 (0xE053), ECC_SM4_CBC_SM3 (0xE013), ECDHE_SM4_GCM_SM3
// (0xE051) and ECDHE_SM4_CBC_SM3 (0xE011). The server chooses by its own
// order (DefaultCipherSuites: GCM before CBC, ECC before ECDHE). The ECDHE
// suites use the SM2 key agreement protocol with both sides' encryption keys
// and need the client's encryption certificate, so a server that picks one
// always asks for client certificates, and a client offers them only when it
// has an encryption key that can do SM2 key agreement.
//
// # Wire choices made for interoperability
//
// Deployed TLCP implementations disagree in places; this package takes the
// side that lets it talk to all of them:
//
//   - The client sends no hello extension unless asked (SendServerName,
//     NextProtos): GmSSL 3.1 servers reject any. Servers accept hellos with
//     or without extensions and answer only what the client sent.
//   - Every handshake message goes in its own record, and a whole flight
//     leaves in one write.
//   - The GCM explicit nonce is read from each record (OpenSSL-family peers
//     start it at a random value); ours is the sequence number.
//   - The ECDHE ClientKeyExchange is sent bare (69 bytes) unless
//     ClientECDHEParamsAsVector asks for the length prefix (71 bytes, as
//     GmSSL wants); servers accept both.
//   - CertificateVerify is signed over the SM3 hash of the handshake
//     messages unless ClientRawCertificateVerify asks for a signature over
//     the messages themselves (as GmSSL sends and expects); servers accept
//     both.
//   - With the ECC suites a client with both certificates sends both
//     (Tongsuo requires them) unless ClientSignCertOnly is set (GmSSL
//     rejects the second); servers accept either.
//   - The three client switches above differ between peer families and
//     are set together by Config.SetClientProfile: ProfileStandard (the
//     default, for Tongsuo, gotlcp, Kona and this package) or ProfileGmSSL
//     (for GmSSL 3 servers that ask for a client certificate).
//   - SM2 signatures use the default user ID 1234567812345678 and sign the
//     message (e = SM3(Z || M)), never a bare digest; ciphertexts are GM/T
//     0009 DER.
//   - Sessions resume by session ID only; no session tickets, extended
//     master secret or renegotiation (a HelloRequest or renegotiating
//     ClientHello gets a no_renegotiation warning).
//
// # GM-capable TLS clients
//
// GM browsers such as 360 Secure Browser first send a TLS ClientHello
// (client_version 0x0303) that lists TLCP suites among its TLS suites.
// Server refuses such a hello with handshake_failure, after which the
// browser retries in TLCP; ServerForTLSHello takes it and answers in
// TLCP 1.1. ParseTLSClientHello reads a peeked hello so that a caller
// can decide which to use; ClientWithHello plays such a client.
//
// # Sessions and client identities
//
// A server session resumes only under what it was made under: the
// Config's SessionContext, client-auth policy, ClientCAs and the server's
// certificate pair (see Config.SessionCache). Resuming checks the client's
// certificates again as a full handshake would (policy, validity, chains
// under the current ClientCAs). Sessions with client certificates that
// were not verified are not cached, and a cached session keeps at most
// 6 KiB of certificates. Under NoClientCert, the certificates the ECDHE
// suites require are used for the key exchange only and are not the
// client's PeerCertificates. A client offers a session only if its current
// configuration accepts the server's certificates.
//
// CBC records are checked in constant time (padding and MAC, with the
// Lucky 13 countermeasure); Finished messages are compared in constant time.
//
// CBC encryption is serial within a record, but each record has its own
// IV: where the CPU can run several SM4-CBC chains at once (GFNI and
// AVX-512, AES-NI, the ARMv8 AES or SM4 instructions; see internal/sm4cbc
// and internal/cpufeat), a Write of 8 KiB or more over a CBC suite
// is cut into up to four records of equal size (at least 4 KiB each, at
// most 2^14 bytes) that are encrypted together. Any record size is valid
// TLCP; peers see only smaller records.
//
// The package is tested against github.com/tjfoc/gmsm's gmtls in both
// directions (suite 0xE013, with and without client authentication) and
// against the published and derived vectors of the PRF, key block, Finished,
// records and SM2 key exchange.
package tlcp

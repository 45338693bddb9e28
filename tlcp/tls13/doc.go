// Package tls13 implements TLS 1.3 (RFC 8446) restricted to the ShangMi
// profile of RFC 8998: the TLS_SM4_GCM_SM3 and TLS_SM4_CCM_SM3 suites,
// sm2sig_sm3 signatures and the curveSM2 and curveSM2MLKEM768 groups, for
// servers and clients, with HelloRetryRequest, ALPN, SNI, client
// certificates at the levels of tlcp.ClientAuthType, ticket resumption
// (psk_dhe_ke only; no 0-RTT) and KeyUpdate. Its API is shaped like
// crypto/tls and like package tlcp beside it.
//
// It speaks nothing else: a ClientHello without TLS 1.3, a ShangMi suite
// and sm2sig_sm3 is refused, and an edge that serves standard TLS too
// decides with ParseClientHello and OffersShangMi which stack gets a
// connection, before either reads it.
//
// Like tlcp, it knows nothing of configuration files, metrics or key
// backends: keys arrive as crypto.Signer (SDF card keys among them), and
// per-connection choices through callbacks (GetCertificate,
// GetConfigForClient, VerifyConnection). It must not import accel.
// docs/protocol.md records its decisions and the facts behind them.
package tls13

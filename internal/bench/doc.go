// Package bench measures what a gmgate deployment can do on the machine it
// runs on: per-core throughput of the GM primitives beside their usual
// counterparts (RunCrypto) and whole TLCP and TLS handshakes against a
// server, either a remote gmgate or one started in a child process so that
// its CPU time is accounted apart from the load generator's
// (RunHandshake).
//
// Figures are measured, never asserted: the tests of this package check the
// shape and the consistency of reports, not speed. The package serves the
// gmgate command only; the proxy must not import it.
package bench

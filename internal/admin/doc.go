// Package admin is the admin listener's JSON API (/api/v1/...) and its
// console (/console/): read-only views of the running gateway — the
// configuration's generation and reloads, listeners and sites,
// certificates, upstream targets, session caches, the key backend, recent
// handshake failures, the migration to GM by site and the cost of
// handshakes — and three write actions (reload, drain and undrain an
// upstream target), off unless configured, for holders of the bearer
// token only. It also guards the whole admin listener (Protect).
//
// admin reads the state the proxy fills in through the State interface
// and the Prometheus registry the metrics are served from: it keeps no
// second count of anything /metrics counts. It must not import proxy, and
// no answer may carry a key, a PIN, a token or a key reference; names
// that came from the network are escaped and every list is bounded.
package admin

// Package observe is what the gateway tells its operator: the Prometheus
// metrics (on a registry of their own, with the handles of hot series
// looked up once), the access log (a line of JSON per request or TCP
// connection, encoded without reflection and written in batches) and
// rate-limited logging of what a hostile or broken peer can repeat at will,
// and the names of handshake alerts and protocol versions that metrics and
// logs of both sides (clients and upstreams) use.
//
// observe must not import the other packages of the gateway (proxy,
// edge, route, upstream, forward): they report into it. It must not be on
// the request path with a WithLabelValues or fmt.Sprintf per request, and
// nothing it writes may carry a secret.
package observe

// Package upstream is where requests go once routed: pools of targets of
// one scheme, the selection policies (round robin, least connections),
// active and passive health, one transport per scheme (http through
// internal/h1client, https and h2c through net/http, tlcp through tlcp
// with its own session cache, tcp), the sets of connections a transport
// holds, and the per-target caps of max_conns_per_target.
//
// upstream must not know clients, sites, routes or the access log; it
// counts into internal/observe. It must not retry a request that is not
// safe to replay, nor one that may have reached a target.
package upstream

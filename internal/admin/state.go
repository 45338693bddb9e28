package admin

import (
	"errors"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/gmgate/gmgate/internal/upstream"
)

// State is what the running gateway tells the admin API. The proxy
// implements it over the generation in service; each call returns a
// snapshot the caller may keep.
type State interface {
	// Config is the configuration in service and its reload history.
	Config() ConfigInfo
	Listeners() []ListenerInfo
	Certificates() []certs.ServedCertificate
	// Revocation is the revocation checking of client certificates
	// (per site and protocol) and of upstream targets' certificates,
	// by scope.
	Revocation() []RevocationScope
	Upstreams() []UpstreamInfo
	SessionCaches() SessionInfo
	// Reload loads the configuration file again, as SIGHUP does.
	Reload() error
	// SetDrained drains (true) or undrains a target of an upstream,
	// named by its URL or host:port; it reports whether the state
	// changed, and ErrNotFound when there is no such upstream or target.
	SetDrained(upstream, target string, drained bool) (bool, error)
}

// ErrNotFound is an upstream or target the configuration does not have.
var ErrNotFound = errors.New("not found")

// ConfigInfo is the configuration in service.
type ConfigInfo struct {
	// File is the configuration file ("" when built in memory).
	File string
	// Generation counts the configurations put in service: 1 at start,
	// one more per successful reload.
	Generation int
	LoadedAt   time.Time
	Reloads    []ReloadRecord
}

// ReloadRecord is one reload attempt.
type ReloadRecord struct {
	Time time.Time `json:"time"`
	// Result is success or failure.
	Result string `json:"result"`
	// Problems are the reasons a reload failed, one a line as config
	// check prints them.
	Problems []string `json:"problems,omitempty"`
	// Generation is the generation in service after the attempt.
	Generation int `json:"generation"`
}

// ListenerInfo is a listener and its sites.
type ListenerInfo struct {
	Name     string     `json:"name"`
	Listen   string     `json:"listen"`
	Protocol string     `json:"protocol"`
	Sites    []SiteInfo `json:"sites,omitempty"`
}

// SiteInfo is one site of a listener (a listener without sites is one
// site of its own name).
type SiteInfo struct {
	Name    string   `json:"name"`
	Hosts   []string `json:"hosts,omitempty"`
	Default bool     `json:"default,omitempty"`
	// Protocols are those the site serves: tlcp, tls.
	Protocols      []string `json:"protocols"`
	TLCPSuites     []string `json:"tlcp_suites,omitempty"`
	TLCPClientAuth string   `json:"tlcp_client_auth,omitempty"`
	TLSMinVersion  string   `json:"tls_min_version,omitempty"`
	TLSClientAuth  string   `json:"tls_client_auth,omitempty"`
	Upstreams      []string `json:"upstreams,omitempty"`
}

// UpstreamInfo is an upstream and its targets.
type UpstreamInfo struct {
	Name    string
	Scheme  string
	Policy  string
	Targets []upstream.TargetState
}

// SessionInfo is the TLCP session caches and the shared session store.
type SessionInfo struct {
	Caches []SessionCacheInfo `json:"caches"`
	// Store is the shared store's kind ("redis") or "" without one.
	Store string `json:"store,omitempty"`
}

// SessionCacheInfo is the TLCP session cache of one certificate source
// (listener/site); sites without resumption have none.
type SessionCacheInfo struct {
	Source string `json:"source"`
	// Size is the most sessions it holds.
	Size            int     `json:"size"`
	LifetimeSeconds float64 `json:"lifetime_seconds"`
	Shared          bool    `json:"shared"`
}

// RevocationScope is one revocation checker: the client certificates of
// a site for one protocol, or the certificates of an upstream's targets.
type RevocationScope struct {
	// Scope is LISTENER/tlcp, LISTENER/SITE/tls or upstreams.NAME, as
	// in the metrics.
	Scope string
	// Checks is "client" or "upstream".
	Checks string
	// Policy is fail_closed or fail_open.
	Policy  string
	Sources []revocation.SourceReport
}

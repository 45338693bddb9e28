package admin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/gmgate/gmgate/internal/observe"
)

// Access is the admin listener's access control.
type Access struct {
	// Tokens are the bearer tokens that let a client in; none means no
	// token is asked for.
	Tokens []Token
	// ClientCerts is set when the listener verifies client certificates
	// (TLS with admin.client_ca): a verified one lets a client read.
	ClientCerts bool
	// WriteActions turns on the write actions, for token holders.
	WriteActions bool
}

// Token is one bearer token and the name it is logged under.
type Token struct {
	Name  string
	value []byte
}

// maxTokens bounds the tokens of a token file.
const maxTokens = 64

// ReadTokenFile reads admin.token_file: one token a line, or "NAME TOKEN"
// to log the writes done with it under NAME; empty lines and lines
// starting with # are skipped. Errors never quote the file's content.
func ReadTokenFile(path string) ([]Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Token
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, value := "token", text
		if f := strings.Fields(text); len(f) == 2 {
			name, value = f[0], f[1]
		} else if len(f) > 2 {
			return nil, fmt.Errorf("line %d: write one token, or a name and a token, a line", line)
		}
		if len(value) < 16 {
			return nil, fmt.Errorf("line %d: the token is shorter than 16 characters; use a long random one (openssl rand -hex 32)", line)
		}
		if len(out) == maxTokens {
			return nil, fmt.Errorf("more than %d tokens", maxTokens)
		}
		out = append(out, Token{Name: observe.SafeText(name), value: []byte(value)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no token in the file")
	}
	return out, nil
}

// token returns the token the request carries, compared in constant
// time with every configured one, or nil.
func (a *Access) token(r *http.Request) *Token {
	auth := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return nil
	}
	got := []byte(strings.TrimSpace(auth[len(prefix):]))
	var found *Token
	for i := range a.Tokens {
		if subtle.ConstantTimeCompare(got, a.Tokens[i].value) == 1 && found == nil {
			found = &a.Tokens[i]
		}
	}
	return found
}

// verifiedPeerKey is the context key of WithVerifiedPeer.
type verifiedPeerKey struct{}

// WithVerifiedPeer returns ctx carrying subject, which gives the subject
// of the verified client certificate of a connection net/http does not
// know (TLCP), or "" when it has none. The admin listener sets it per
// connection (http.Server.ConnContext).
func WithVerifiedPeer(ctx context.Context, subject func() string) context.Context {
	return context.WithValue(ctx, verifiedPeerKey{}, subject)
}

// verifiedCert is the subject of the request's verified client
// certificate, TLS or TLCP, or "".
func verifiedCert(r *http.Request) string {
	if r.TLS != nil {
		if len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			return ""
		}
		return observe.SafeText(r.TLS.VerifiedChains[0][0].Subject.String())
	}
	if subject, ok := r.Context().Value(verifiedPeerKey{}).(func() string); ok {
		if s := subject(); s != "" {
			return observe.SafeText(s)
		}
	}
	return ""
}

// open reports whether the listener asks for nothing (loopback without
// token or client certificates).
func (a *Access) open() bool { return len(a.Tokens) == 0 && !a.ClientCerts }

// Protect guards next, the whole admin listener: /healthz and /readyz
// (probes) and the console's static files are open; everything else
// needs the token or a verified client certificate when either is
// configured. Without either (a loopback listener), the API and console
// answer only requests addressed to a loopback name, so that a web page
// cannot reach them through DNS rebinding.
func (h *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := h.access()
		p := r.URL.Path
		switch {
		case p == "/healthz" || p == "/readyz":
			next.ServeHTTP(w, r)
			return
		case a.open():
			if (strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/console/")) && !loopbackHost(r.Host) {
				writeJSON(w, http.StatusForbidden, apiError{"the admin API answers requests to a loopback address (127.0.0.1, ::1, localhost) only"})
				return
			}
			next.ServeHTTP(w, r)
			return
		case strings.HasPrefix(p, "/console/") || p == "/":
			// Static files without data; the page asks for the token.
			next.ServeHTTP(w, r)
			return
		}
		if a.token(r) == nil && verifiedCert(r) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gmgate admin"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"this admin listener needs a bearer token (Authorization: Bearer TOKEN) or a client certificate"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// write wraps a write action: off unless admin.write_actions, for token
// holders only, and logged with who did it.
func (h *Handler) write(action string, fn func(http.ResponseWriter, *http.Request) (int, any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := h.access()
		if !a.WriteActions {
			writeJSON(w, http.StatusForbidden, apiError{"write actions are off; turn them on with admin.write_actions (and admin.token_file)"})
			return
		}
		tok := a.token(r)
		if tok == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gmgate admin"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"write actions need the bearer token"})
			return
		}
		code, body := fn(w, r)
		attrs := []any{"action", action, "by", tok.Name, "client", r.RemoteAddr, "status", code}
		if up := r.PathValue("upstream"); up != "" {
			attrs = append(attrs, "upstream", observe.SafeText(up), "target", observe.SafeText(r.PathValue("target")))
		}
		if cert := verifiedCert(r); cert != "" {
			attrs = append(attrs, "client_certificate", cert)
		}
		h.o.Log.Info("admin write action", attrs...)
		writeJSON(w, code, body)
	}
}

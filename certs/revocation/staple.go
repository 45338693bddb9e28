package revocation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Staple is an OCSP response about a server's own certificate, verified
// and current, to be sent to clients in the handshake (OCSP stapling).
type Staple struct {
	// DER is the whole OCSPResponse, as the responder sent it.
	DER []byte
	// Status is the answer about the certificate; only a StatusGood
	// staple may be sent.
	Status     Status
	ThisUpdate time.Time
	// NextUpdate is when the answer stops being current (ThisUpdate
	// plus DefaultOCSPMaxAge for an answer without one).
	NextUpdate time.Time
	// Responder is the URL asked, without credentials.
	Responder string
}

// StapleOptions configure FetchStaple.
type StapleOptions struct {
	// HTTPClient sends the request; one that follows no redirects when
	// nil.
	HTTPClient *http.Client
	// Timeout bounds the request; DefaultOCSPTimeout when zero.
	Timeout time.Duration
	// MaxBytes bounds the response; DefaultMaxOCSPBytes when zero.
	MaxBytes int64
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// ErrNoResponder is returned by FetchStaple for a certificate whose
// authorityInfoAccess names no OCSP responder.
var ErrNoResponder = errors.New("the certificate names no OCSP responder (authorityInfoAccess)")

// FetchStaple asks the OCSP responder named in leaf's authorityInfoAccess
// about leaf, issued by issuer, and returns its answer once the response
// verifies with issuer (or a responder certificate issuer signed for OCSP
// signing), answers for leaf and is current. The answer may be revoked
// or unknown: the caller staples only StatusGood.
func FetchStaple(ctx context.Context, leaf, issuer *smx509.Certificate, opts StapleOptions) (*Staple, error) {
	if opts.HTTPClient == nil {
		client := defaultClient()
		defer client.CloseIdleConnections()
		opts.HTTPClient = client
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultOCSPTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxOCSPBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	responder := ""
	for _, u := range leaf.OCSPServer {
		if _, err := checkURL(u); err == nil {
			responder = u
			break
		}
	}
	if responder == "" {
		return nil, ErrNoResponder
	}
	iss := fromSM(issuer)
	id, err := newCertID(hashByOID(HashSHA1.oid()), HashSHA1.oid(), iss, leaf.SerialNumber)
	if err != nil {
		return nil, fmt.Errorf("issuer certificate: %v", err)
	}
	der, err := httpDo(ctx, opts.HTTPClient, responder, marshalOCSPRequest(id), "application/ocsp-request", opts.MaxBytes, opts.Timeout)
	if err != nil {
		return nil, err
	}
	st, err := CheckStaple(der, leaf, issuer, opts.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redact(responder), err)
	}
	st.Responder = redact(responder)
	return st, nil
}

// CheckStaple verifies an OCSP response about leaf, issued by issuer, at
// now: its signature, that it answers for leaf, and that it is current.
func CheckStaple(der []byte, leaf, issuer *smx509.Certificate, now time.Time) (*Staple, error) {
	sr, err := checkOCSPAnswer(der, issuer, fromSM(issuer), leaf.SerialNumber, now, DefaultOCSPMaxAge)
	if err != nil {
		return nil, err
	}
	return &Staple{DER: der, Status: sr.status, ThisUpdate: sr.thisUpdate, NextUpdate: sr.nextUpdate}, nil
}

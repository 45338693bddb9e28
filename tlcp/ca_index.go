package tlcp

import (
	"sync"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
)

// caDigest identifies a CA certificate in a marshaled session: the SM3
// digest of its DER.
type caDigest [sm3.Size]byte

// maxKnownCAs bounds knownCAs. CA certificates come only from the
// ClientCAs pools that verified a client's chain, so a process knows a
// handful; past the bound, a session naming an unknown CA is verified
// again, as before it was known.
const maxKnownCAs = 1024

// knownCAs are the CA certificates of the client chains this process has
// verified, by digest, so that a session from a shared cache, which names
// its chains' CAs by digest, finds them again. Finding one proves nothing
// by itself: a resumption still checks that the certificate is in the
// ClientCAs of the moment (chainValidAt).
var knownCAs = caIndex{bySum: map[caDigest]*smx509.Certificate{}, byCert: map[*smx509.Certificate]caDigest{}}

type caIndex struct {
	mu     sync.RWMutex
	bySum  map[caDigest]*smx509.Certificate
	byCert map[*smx509.Certificate]caDigest
}

// digest returns ca's digest and remembers ca under it.
func (x *caIndex) digest(ca *smx509.Certificate) caDigest {
	x.mu.RLock()
	sum, ok := x.byCert[ca]
	x.mu.RUnlock()
	if ok {
		return sum
	}
	sum = sm3.Sum(ca.Raw)
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.bySum[sum]; !ok && len(x.bySum) < maxKnownCAs {
		x.bySum[sum] = ca
	}
	if len(x.byCert) < maxKnownCAs {
		x.byCert[ca] = sum
	}
	return sum
}

// lookup returns the CA certificate with digest sum, if known.
func (x *caIndex) lookup(sum caDigest) *smx509.Certificate {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.bySum[sum]
}

package revocation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// errTooLarge is returned for a CRL or response over its size bound.
var errTooLarge = errors.New("larger than allowed")

// isURL reports whether a source is an http(s) URL rather than a file.
func isURL(source string) bool {
	return strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://")
}

// checkURL accepts only absolute http and https URLs.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s is not a URL: %v", redact(raw), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: give an http:// or https:// URL", redact(raw))
	}
	return u, nil
}

// redact names a source without the user information a URL may carry.
func redact(source string) string {
	if !isURL(source) {
		return source
	}
	u, err := url.Parse(source)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery, u.ForceQuery = "", false
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// defaultClient fetches without following redirects (a distribution
// point or responder that moves is a configuration to update), through
// the environment's proxy.
func defaultClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// readFile reads at most limit bytes of a file.
func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, %w (%d bytes)", path, st.Size(), errTooLarge, limit)
	}
	return readLimited(f, limit, path)
}

// readLimited reads r to its end, refusing more than limit bytes.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is %w (%d bytes)", what, errTooLarge, limit)
	}
	return b, nil
}

// httpDo sends a GET (body nil) or a POST of body with contentType and
// returns the response body, at most limit bytes, within timeout.
func httpDo(ctx context.Context, client *http.Client, rawURL string, body []byte, contentType string, limit int64, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method := http.MethodGet
	var rd io.Reader
	if body != nil {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", redact(rawURL), err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s: %v", redact(rawURL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", redact(rawURL), resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%s: the answer of %d bytes is %w (%d bytes)", redact(rawURL), resp.ContentLength, errTooLarge, limit)
	}
	b, err := readLimited(resp.Body, limit, "the answer")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redact(rawURL), err)
	}
	return b, nil
}

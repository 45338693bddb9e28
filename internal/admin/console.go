package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// The console is one page of HTML, CSS and plain JavaScript, embedded in
// the binary: no CDN, no build step, it works on an offline network. Its
// charts are inline SVG drawn by the page itself.
//
//go:embed console
var consoleFiles embed.FS

func consoleHandler() http.Handler {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/console/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
	})
}

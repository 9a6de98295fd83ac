// Package webui serves the ahpd web page: the bundle that `npm run build`
// writes to dist/ (an AHP/1 client with an xterm.js terminal), embedded
// into the binary.
//
// In git, dist/ holds only .gitkeep, so `go build` works in a clone where
// nobody ran npm; the handler then serves a page that says how to build
// the web page (`make web`, i.e. `cd daemon/webui && npm ci && npm run build`).
//
// The handler is immutable after construction and safe for concurrent use.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

//go:embed all:dist
var dist embed.FS

// Handler returns the handler for the web page, to be mounted at "/" next
// to the WebSocket endpoint /v1/ws, or under a path prefix with the prefix
// stripped (publicUrl): the page's URLs are relative, its WebSocket too.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		// "dist" is a literal valid path; fs.Sub cannot fail on it.
		panic(err)
	}
	return newHandler(sub)
}

// asset is one file of the bundle. Its bytes stay where they are (for the
// embedded bundle, in the binary's read-only data): each response reads
// them through the file system, and the ETag is computed on the first
// request. Copying the bundle out at start held 0.6 MiB of heap, and
// hashing it touched as many pages of the binary, in every daemon whether
// or not anyone opened the page (docs/benchmarks-memory.md).
type asset struct {
	files       fs.FS
	name        string // in files; "" when body is the content
	body        []byte
	contentType string
	etagOnce    sync.Once
	etag        string // "" when the file could not be read
}

type handler struct {
	assets map[string]*asset // by URL path, "/" for index.html
}

// newHandler builds the handler over files, the contents of dist/. Without
// index.html it serves the build instructions at "/" and 404 elsewhere.
func newHandler(files fs.FS) http.Handler {
	h := &handler{assets: make(map[string]*asset)}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(path.Base(p), ".") {
			return nil // unreadable entries and dotfiles (.gitkeep) are not served
		}
		h.assets["/"+p] = &asset{files: files, name: p, contentType: contentType(p)}
		return nil
	})
	if a, ok := h.assets["/index.html"]; ok {
		h.assets["/"] = a
	} else {
		h.assets = map[string]*asset{"/": {body: []byte(notBuiltPage), contentType: contentType("index.html")}}
	}
	return h
}

// open returns the asset's content.
func (a *asset) open() (io.ReadSeeker, func(), error) {
	if a.name == "" {
		return bytes.NewReader(a.body), func() {}, nil
	}
	f, err := a.files.Open(a.name)
	if err != nil {
		return nil, nil, err
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		f.Close()
		return nil, nil, fmt.Errorf("webui: %s cannot seek", a.name)
	}
	return rs, func() { f.Close() }, nil
}

// tag returns the asset's ETag, computed once from its content.
func (a *asset) tag() string {
	a.etagOnce.Do(func() {
		r, done, err := a.open()
		if err != nil {
			return
		}
		defer done()
		sum := sha256.New()
		if _, err := io.Copy(sum, r); err != nil {
			return
		}
		a.etag = `"` + hex.EncodeToString(sum.Sum(nil)[:16]) + `"`
	})
	return a.etag
}

// contentTypes are the types of what the bundle holds. A fixed table, not
// mime.TypeByExtension: that reads the system's MIME tables (/etc/mime.types
// and others) on first use, which held 0.4 MiB of heap in every daemon for
// the life of the process (docs/benchmarks-memory.md), and whose answers
// would vary with the host.
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".map":   "application/json",
	".json":  "application/json",
	".txt":   "text/plain; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/vnd.microsoft.icon",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".ttf":   "font/ttf",
	".wasm":  "application/wasm",
}

func contentType(name string) string {
	if ct, ok := contentTypes[strings.ToLower(path.Ext(name))]; ok {
		return ct
	}
	return "application/octet-stream"
}

// hostPattern is what a Host header must look like to be named in the
// Content-Security-Policy (it must not carry ';' or spaces into the header).
// Compiled at the first page served, not at every start.
var hostPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)
})

// contentSecurityPolicy allows scripts only from this origin and
// connections only to it. style-src needs 'unsafe-inline' because xterm.js
// injects <style> elements (its scrollbar and DOM renderer) and has no
// nonce option; inline styles cannot run script.
func contentSecurityPolicy(host string) string {
	connect := "'self'"
	if hostPattern().MatchString(host) {
		// Older browsers do not let 'self' match ws: and wss:.
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
		"img-src 'self' data:; font-src 'self'; connect-src " + connect + "; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", contentSecurityPolicy(r.Host))
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, done, err := a.open()
	if err != nil {
		http.Error(w, "cannot read "+r.URL.Path, http.StatusInternalServerError)
		return
	}
	defer done()
	hd.Set("Content-Type", a.contentType)
	// File names carry no content hash, so every file is revalidated; the
	// ETag makes that a 304.
	hd.Set("Cache-Control", "no-cache")
	if etag := a.tag(); etag != "" {
		hd.Set("ETag", etag)
	}
	http.ServeContent(w, r, "", time.Time{}, body)
}

// notBuiltPage is served at "/" when the bundle was not built.
const notBuiltPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ahpd — web page not built</title>
<style>
body { background: #0f1115; color: #d7dae0; font: 15px/1.5 system-ui, sans-serif; margin: 0; }
main { max-width: 40rem; margin: 12vh auto; padding: 0 1.5rem; }
h1 { font-size: 1.3rem; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; background: #161a20; }
pre { padding: .8rem 1rem; border: 1px solid #262b33; border-radius: 4px; }
code { padding: 1px 4px; }
</style>
</head>
<body>
<main>
<h1>The ahpd web page was not built into this binary</h1>
<p>This ahpd was compiled from a source tree where the web bundle
(<code>daemon/webui/dist/</code>) had not been built. Build it, then rebuild ahpd:</p>
<pre>make web
# which runs:
cd daemon/webui &amp;&amp; npm ci &amp;&amp; npm run build</pre>
<p>It needs Node.js 20 or later. Terminals stay reachable meanwhile with
<code>ahpctl attach URI</code>.</p>
</main>
</body>
</html>
`

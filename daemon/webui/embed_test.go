package webui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
)

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v // net/http reads the Host header into Request.Host
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkSecurityHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, part := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, part) {
			t.Errorf("Content-Security-Policy = %q, want it to contain %q", csp, part)
		}
	}
	if strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
		t.Errorf("Content-Security-Policy = %q allows inline or eval'd script", csp)
	}
}

func TestHandlerBuilt(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>ahpd</title>")},
		"main.js":    {Data: []byte("console.log(1)")},
		"main.css":   {Data: []byte("body{}")},
		"font.WOFF2": {Data: []byte("wOF2")},
		"blob.xyz":   {Data: []byte("?")},
		".gitkeep":   {Data: nil},
	})
	tests := []struct {
		path, wantType, wantBody string
	}{
		{"/", "text/html; charset=utf-8", "<!doctype html><title>ahpd</title>"},
		{"/index.html", "text/html; charset=utf-8", "<!doctype html><title>ahpd</title>"},
		{"/main.js", "text/javascript; charset=utf-8", "console.log(1)"},
		{"/main.css", "text/css; charset=utf-8", "body{}"},
		{"/font.WOFF2", "font/woff2", "wOF2"},
		// Not in the table: never guessed from the host's MIME files.
		{"/blob.xyz", "application/octet-stream", "?"},
	}
	for _, tc := range tests {
		res := get(t, h, http.MethodGet, tc.path, map[string]string{"Host": "127.0.0.1:7681"})
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200", tc.path, res.StatusCode)
		}
		if got := res.Header.Get("Content-Type"); got != tc.wantType {
			t.Errorf("GET %s Content-Type = %q, want %q", tc.path, got, tc.wantType)
		}
		if got := body(t, res); got != tc.wantBody {
			t.Errorf("GET %s body = %q, want %q", tc.path, got, tc.wantBody)
		}
		if got := res.Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s Cache-Control = %q, want no-cache", tc.path, got)
		}
		checkSecurityHeaders(t, res)
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "ws://127.0.0.1:7681 wss://127.0.0.1:7681") {
			t.Errorf("GET %s CSP = %q, want ws/wss of the host", tc.path, csp)
		}
	}

	for _, p := range []string{"/.gitkeep", "/nope.js", "/v1/ws", "/dist/main.js"} {
		if res := get(t, h, http.MethodGet, p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
	}

	// Revalidation: the ETag turns a repeat request into 304.
	res := get(t, h, http.MethodGet, "/main.js", nil)
	etag := res.Header.Get("ETag")
	if etag == "" {
		t.Fatal("GET /main.js has no ETag")
	}
	if res := get(t, h, http.MethodGet, "/main.js", map[string]string{"If-None-Match": etag}); res.StatusCode != http.StatusNotModified {
		t.Errorf("GET /main.js If-None-Match = %d, want 304", res.StatusCode)
	}

	if res := get(t, h, http.MethodPost, "/", nil); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d, want 405", res.StatusCode)
	}
}

func TestHandlerNotBuilt(t *testing.T) {
	h := newHandler(fstest.MapFS{".gitkeep": {Data: nil}})
	res := get(t, h, http.MethodGet, "/", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", res.StatusCode)
	}
	if got := res.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/html", got)
	}
	b := body(t, res)
	for _, want := range []string{"make web", "npm ci &amp;&amp; npm run build"} {
		if !strings.Contains(b, want) {
			t.Errorf("fallback page does not mention %q", want)
		}
	}
	if strings.Contains(b, "<script") {
		t.Error("fallback page contains a script")
	}
	checkSecurityHeaders(t, res)
	if res := get(t, h, http.MethodGet, "/main.js", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /main.js = %d, want 404", res.StatusCode)
	}
}

func TestContentSecurityPolicyRejectsOddHosts(t *testing.T) {
	for _, host := range []string{"evil; script-src *", "a b", ""} {
		csp := contentSecurityPolicy(host)
		if strings.Contains(csp, "ws://") || strings.Contains(csp, "script-src *") {
			t.Errorf("contentSecurityPolicy(%q) = %q, want only 'self' for connect-src", host, csp)
		}
	}
	if csp := contentSecurityPolicy("[::1]:7681"); !strings.Contains(csp, "ws://[::1]:7681") {
		t.Errorf("contentSecurityPolicy([::1]:7681) = %q, want ws://[::1]:7681", csp)
	}
}

// TestHandlerEmbedded checks the real embedded tree: either the built
// bundle or the fallback page, never an error.
func TestHandlerEmbedded(t *testing.T) {
	res := get(t, Handler(), http.MethodGet, "/", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", res.StatusCode)
	}
	checkSecurityHeaders(t, res)
}

// countingFS counts the files opened through it.
type countingFS struct {
	fs.FS
	opens atomic.Int64
}

func (c *countingFS) Open(name string) (fs.File, error) {
	if name != "." {
		c.opens.Add(1)
	}
	return c.FS.Open(name)
}

// TestHandlerReadsOnDemand: building the handler reads no file (the
// embedded bundle stays in the binary, no copy on the heap, none of its
// pages touched until the page is asked for); a request reads its file,
// with a stable ETag.
func TestHandlerReadsOnDemand(t *testing.T) {
	files := &countingFS{FS: fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>ahpd</title>")},
		"main.js":    {Data: []byte("console.log(1)")},
	}}
	h := newHandler(files)
	if n := files.opens.Load(); n != 0 {
		t.Fatalf("building the handler opened %d files, want none", n)
	}
	res := get(t, h, http.MethodGet, "/main.js", nil)
	if got := body(t, res); got != "console.log(1)" {
		t.Fatalf("GET /main.js body = %q", got)
	}
	etag := res.Header.Get("ETag")
	if etag == "" || files.opens.Load() == 0 {
		t.Fatalf("GET /main.js: ETag %q after %d opens", etag, files.opens.Load())
	}
	if again := get(t, h, http.MethodGet, "/main.js", nil).Header.Get("ETag"); again != etag {
		t.Fatalf("ETag %q, then %q", etag, again)
	}
}

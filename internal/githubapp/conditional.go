package githubapp

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bounds of the conditional-request cache: a response larger than
// maxCachedBody is not kept, and at most maxCachedBytes of bodies are. A
// bound in bytes, not responses, keeps a pass's every read however many
// units it reads.
//
// A pass asks for the same URLs in the same order, so a full cache that made
// room for each new answer by dropping its oldest would drop each entry just
// before its use and answer nothing at all. A full cache instead drops only
// entries no one asked for in unusedFor, and otherwise keeps what it holds:
// the reads it holds stay free, the others cost what they would without it.
const (
	maxCachedBody  = 4 << 20
	maxCachedBytes = 64 << 20
	// unusedFor outlasts a pass and the installation token an ETag was
	// given under (an hour), after which no request matches the entry.
	unusedFor = 2 * time.Hour
)

// FromCacheHeader marks a response served from the cache after GitHub
// answered 304 Not Modified.
const FromCacheHeader = "X-From-Cache"

// conditional repeats GETs as conditional requests: it keeps each answer
// with its ETag, sends If-None-Match the next time, and on 304 Not Modified
// (which GitHub does not count against the rate limit) hands back the kept
// answer. go-github leaves caching to the transport and the usual cache
// (gregjones/httpcache) is unmaintained, so this small one is written here.
type conditional struct {
	next    http.RoundTripper
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]*cached
	size    int // bytes of the kept bodies and keys
}

type cached struct {
	etag   string
	header http.Header
	body   []byte
	used   time.Time // when it was kept or last answered a request
}

func newConditional(next http.RoundTripper) *conditional {
	return &conditional{next: next, now: time.Now, entries: map[string]*cached{}}
}

func cacheKey(r *http.Request) string { return r.URL.String() + "\x00" + r.Header.Get("Accept") }

// RoundTrip implements http.RoundTripper.
func (c *conditional) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("If-None-Match") != "" {
		return c.next.RoundTrip(req)
	}
	key := cacheKey(req)
	c.mu.Lock()
	var entry cached
	held, have := c.entries[key]
	if have {
		held.used = c.now()
		entry = *held
	}
	c.mu.Unlock()
	if have {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", entry.etag)
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case have && resp.StatusCode == http.StatusNotModified:
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		header := entry.header.Clone()
		for k, v := range resp.Header {
			if strings.HasPrefix(k, "X-Ratelimit-") || k == "Date" {
				header[k] = v
			}
		}
		header.Set(FromCacheHeader, "1")
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
			Header: header, Body: io.NopCloser(bytes.NewReader(entry.body)), ContentLength: int64(len(entry.body)), Request: resp.Request,
		}, nil
	case resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "" && resp.ContentLength <= maxCachedBody:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
		if err != nil {
			_ = resp.Body.Close()
			return nil, err
		}
		if len(body) > maxCachedBody {
			// A body of unknown length (chunked, or unzipped by the
			// transport) turned out too large to keep: the caller still
			// gets all of it, the part read and the rest unread.
			resp.Body = readThenClose{Reader: io.MultiReader(bytes.NewReader(body), resp.Body), Closer: resp.Body}
			return resp, nil
		}
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		c.keep(key, cached{etag: resp.Header.Get("ETag"), header: resp.Header.Clone(), body: body})
	}
	return resp, nil
}

// readThenClose reads from Reader and closes Closer.
type readThenClose struct {
	io.Reader
	io.Closer
}

// keep holds entry for key when there is room for it, after dropping the
// entries unused for unusedFor where there is not. An answer that replaces
// one held for the same key is never left out for an older one: the held
// answer is dropped with it.
func (c *conditional) keep(key string, entry cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	entry.used = now
	c.drop(key)
	need := len(key) + len(entry.body)
	if c.size+need > maxCachedBytes {
		for k, e := range c.entries {
			if now.Sub(e.used) > unusedFor {
				c.drop(k)
			}
		}
	}
	if c.size+need > maxCachedBytes {
		return
	}
	c.entries[key] = &entry
	c.size += need
}

func (c *conditional) drop(key string) {
	if e, ok := c.entries[key]; ok {
		c.size -= len(key) + len(e.body)
		delete(c.entries, key)
	}
}

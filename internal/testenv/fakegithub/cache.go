package fakegithub

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// rateLimit is an installation's hourly budget on github.com.
const rateLimit = 5000

// writeCacheable answers a GET as GitHub does for conditional requests: the
// body with an ETag, or 304 Not Modified without a body when If-None-Match
// names the current ETag. GitHub does not count a 304 against the rate limit.
// GitHub's ETag belongs to the credential that read it too (its answers vary
// on Authorization, and an ETag read with one installation token is no match
// under the next), so the ETag hashes the Authorization header with the body.
func writeCacheable(w http.ResponseWriter, r *http.Request, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	_, credential, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256(append([]byte(credential+"\x00"), data...))
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "private, max-age=60, s-maxage=60")
	w.Header().Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	if match := r.Header.Get("If-None-Match"); match != "" && (match == etag || match == etag[2:]) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(data, '\n'))
}

// RateLimitUsed counts the installation's requests GitHub would charge:
// every authenticated repository call except a 304 answer to a conditional request.
func (s *Server) RateLimitUsed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rateUsedLocked()
}

func (s *Server) rateUsedLocked() int {
	n := 0
	for _, c := range s.calls {
		if c.Auth == "installation" && c.Status != http.StatusNotModified {
			n++
		}
	}
	return n
}

// setRateHeaders sets GitHub's rate-limit headers as they stand before this call.
func (s *Server) setRateHeaders(w http.ResponseWriter) {
	s.mu.Lock()
	used := s.rateUsedLocked()
	s.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(rateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(rateLimit-used-1, 0)))
	h.Set("X-RateLimit-Used", strconv.Itoa(used+1))
	h.Set("X-RateLimit-Resource", "core")
}

package fakegithub

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults for the App a Server trusts.
const (
	DefaultAppID          int64 = 1001
	DefaultInstallationID int64 = 2002
	// enterprisePrefix is where GitHub Enterprise Server serves the REST API;
	// the fake answers under it as well as at its root.
	enterprisePrefix = "/api/v3"
	docsURL          = "https://docs.github.com/rest"
)

// Server is a running fake GitHub.
type Server struct {
	// AppID and InstallationID are the App and installation it trusts.
	AppID          int64
	InstallationID int64
	// PrivateKeyPEM is the App's private key (PKCS#1 PEM), as GitHub hands it out.
	PrivateKeyPEM []byte

	srv    *httptest.Server
	public *rsa.PublicKey

	mu       sync.Mutex
	now      func() time.Time
	tokenTTL time.Duration
	tokens   map[string]time.Time
	issued   int
	repos    map[string]*repository
	calls    []Call
	failWith int
	// nextID numbers deployments and their statuses, as GitHub's ids do.
	nextID int64
}

// Call is one request the fake answered.
type Call struct {
	Method string
	// Path is the request's path without an Enterprise prefix; Query its raw query.
	Path  string
	Query string
	// Auth says how the caller authenticated: "app" (App JWT),
	// "installation" (installation token) or "" (none or rejected).
	Auth   string
	Status int
}

func (c Call) String() string { return fmt.Sprintf("%s %s -> %d", c.Method, c.Path, c.Status) }

// Option changes a Server before it starts.
type Option func(*Server)

// WithClock makes the fake read time from now, for tests of token expiry.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New starts a fake GitHub that trusts one App with a fresh 2048-bit key; it
// stops when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake GitHub listening on addr, as New does, for a caller
// that outlives one test (a package's shared estate, whose pods reach it on
// the node's bridge); Close stops it.
func Start(addr string, opts ...Option) (*Server, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate the App's key: %w", err)
	}
	s := &Server{
		AppID:          DefaultAppID,
		InstallationID: DefaultInstallationID,
		PrivateKeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		public:         &key.PublicKey,
		now:            time.Now,
		tokenTTL:       time.Hour,
		tokens:         map[string]time.Time{},
		repos:          map[string]*repository{},
	}
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the fake GitHub: %w", err)
	}
	s.srv = httptest.NewUnstartedServer(s.handler())
	_ = s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// URL is the API root, as api.github.com would be.
func (s *Server) URL() string { return s.srv.URL }

// EnterpriseURL is the API root as GitHub Enterprise Server spells it.
func (s *Server) EnterpriseURL() string { return s.srv.URL + enterprisePrefix }

// Client is an HTTP client that reaches the fake.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// SetTokenTTL sets how long installation tokens issued from now on live
// (GitHub: one hour).
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenTTL = d
}

// TokensIssued counts the installation tokens handed out.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

// FailWith makes every repository call answer status (for example 502) until
// it is called with 0. Token requests still succeed, so a test reaches the
// failure it means to.
func (s *Server) FailWith(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = status
}

// Calls lists every call answered, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsMatching counts the calls with this method whose path contains fragment.
func (s *Server) CallsMatching(method, fragment string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method && strings.Contains(c.Path, fragment) {
			n++
		}
	}
	return n
}

// ResetCalls forgets the calls recorded so far.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// route is one endpoint; auth names the credential it takes.
type route struct {
	pattern string
	auth    string
	handle  func(s *Server, w http.ResponseWriter, r *http.Request)
}

func (s *Server) routes() []route {
	return []route{
		{"POST /app/installations/{id}/access_tokens", "app", (*Server).createInstallationToken},
		{"GET /repos/{owner}/{repo}/contents/{path...}", "installation", (*Server).getContents},
		{"PUT /repos/{owner}/{repo}/contents/{path...}", "installation", (*Server).putContents},
		{"GET /repos/{owner}/{repo}/git/blobs/{sha}", "installation", (*Server).getBlob},
		{"GET /repos/{owner}/{repo}/deployments", "installation", (*Server).listDeployments},
		{"GET /repos/{owner}/{repo}/deployments/{id}/statuses", "installation", (*Server).listStatuses},
		{"POST /repos/{owner}/{repo}/deployments/{id}/statuses", "installation", (*Server).createStatus},
	}
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			auth, ok := s.authenticate(rec, r, rt.auth)
			if ok && rt.auth == "installation" {
				s.setRateHeaders(rec)
				ok = !s.failing(rec) && !s.readOnly(rec, r)
			}
			if ok {
				rt.handle(s, rec, r)
			}
			s.record(r, auth, rec.status)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found")
		s.record(r, "", http.StatusNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, enterprisePrefix); ok {
			r2 := r.Clone(r.Context())
			r2.URL.Path = rest
			r2.URL.RawPath = ""
			r = r2
		}
		w.Header().Set("X-GitHub-Api-Version-Selected", "2022-11-28")
		mux.ServeHTTP(w, r)
	})
}

// ArchiveRepository makes repo read-only, as archiving it on GitHub does:
// every write to it is answered 403.
func (s *Server) ArchiveRepository(repo string) {
	s.AddRepository(repo)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo].archived = true
}

// readOnly answers a write to an archived repository as GitHub does.
func (s *Server) readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	s.mu.Lock()
	repo, ok := s.repos[r.PathValue("owner")+"/"+r.PathValue("repo")]
	archived := ok && repo.archived
	s.mu.Unlock()
	if archived {
		writeError(w, http.StatusForbidden, "Repository was archived so is read-only.")
	}
	return archived
}

func (s *Server) failing(w http.ResponseWriter) bool {
	s.mu.Lock()
	status := s.failWith
	s.mu.Unlock()
	if status == 0 {
		return false
	}
	writeError(w, status, http.StatusText(status))
	return true
}

func (s *Server) record(r *http.Request, auth string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: auth, Status: status})
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// errorBody is GitHub's client-error shape.
type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, errorBody{Message: message, DocumentationURL: docsURL, Status: fmt.Sprint(status)})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func randomToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return "ghs_" + hex.EncodeToString(b)
}

// Repositories lists the repositories the fake holds, sorted.
func (s *Server) Repositories() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.repos))
	for name := range s.repos {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

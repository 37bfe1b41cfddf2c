package fakegarage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Perm is a key's permissions on a bucket.
type Perm struct {
	Read, Write, Owner bool
}

type key struct {
	id, name, secret string
	created          time.Time
	// expiration is when the key stops signing in; nil for never.
	expiration *time.Time
}

// expiry is the key's expired and expiration fields as Garage answers them.
func (k *key) expiry() (expired bool, expiration any) {
	if k.expiration == nil {
		return false, nil
	}
	return !time.Now().Before(*k.expiration), k.expiration.Format(time.RFC3339)
}

type bucket struct {
	id      string
	created time.Time
	aliases []string
	perms   map[string]Perm
}

// Garage is a running double. Its methods arrange and inspect its state.
type Garage struct {
	// URL is the admin API's base address, http://127.0.0.1:<port>.
	URL string
	// Token is the admin token it accepts as a bearer token.
	Token string

	drift  func(error)
	router routers.Router
	srv    *httptest.Server

	mu       sync.Mutex
	keys     map[string]*key
	buckets  map[string]*bucket
	aliases  map[string]string
	requests map[string]int
	writes   int
}

// Option changes how New builds the double.
type Option func(*Garage)

// OnDrift hands every disagreement with the published document to report
// instead of failing the test; the double's own tests use it.
func OnDrift(report func(error)) Option { return func(g *Garage) { g.drift = report } }

// New starts a double for this test, empty like a Garage built from nothing,
// and stops it when the test ends. Without Garage's document beside the
// repository the test fails, naming the file.
func New(t testing.TB, opts ...Option) *Garage {
	t.Helper()
	path, err := DocumentPath()
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := LoadDocument(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route Garage's admin API document: %v", err)
	}
	g := &Garage{
		Token:  "admin-" + randomHex(16),
		router: router,
		drift:  func(err error) { t.Errorf("garage double: drift from Garage's admin API document: %v", err) },
	}
	g.reset()
	for _, o := range opts {
		o(g)
	}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	t.Cleanup(g.srv.Close)
	return g
}

func (g *Garage) reset() {
	g.keys = map[string]*key{}
	g.buckets = map[string]*bucket{}
	g.aliases = map[string]string{}
	g.requests = map[string]int{}
	g.writes = 0
}

// Rebuild drops every key, bucket, alias and grant: Garage rebuilt from
// nothing. The request counts start again too.
func (g *Garage) Rebuild() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reset()
}

// HoldKey creates a key named name as Garage's own CreateKey would, and
// returns its access key id and secret.
func (g *Garage) HoldKey(name string) (id, secret string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.newKey(name)
	return k.id, k.secret
}

// HoldImportedKey puts a key with this id and secret into Garage.
func (g *Garage) HoldImportedKey(id, secret, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys[id] = &key{id: id, name: name, secret: secret, created: time.Now().UTC()}
}

// ExpireKey sets the key's expiration to a moment past, as UpdateKey with
// an expiration would: Garage then reports it expired.
func (g *Garage) ExpireKey(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	past := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	g.keys[id].expiration = &past
}

// Key reports the key with this id: its name and secret.
func (g *Garage) Key(id string) (name, secret string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k, ok := g.keys[id]
	if !ok {
		return "", "", false
	}
	return k.name, k.secret, true
}

// KeysNamed lists the ids of the keys named name, sorted.
func (g *Garage) KeysNamed(name string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for _, k := range g.keys {
		if k.name == name {
			ids = append(ids, k.id)
		}
	}
	sort.Strings(ids)
	return ids
}

// KeyCount is how many keys Garage holds.
func (g *Garage) KeyCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.keys)
}

// Bucket reports the bucket with this global alias: its id and each key's
// permissions on it.
func (g *Garage) Bucket(alias string) (id string, perms map[string]Perm, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.byAlias(alias)
	if b == nil {
		return "", nil, false
	}
	perms = make(map[string]Perm, len(b.perms))
	for k, p := range b.perms {
		perms[k] = p
	}
	return b.id, perms, true
}

// BucketCount is how many buckets Garage holds.
func (g *Garage) BucketCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.buckets)
}

// HoldBucket creates a bucket with this global alias, as CreateBucket would.
func (g *Garage) HoldBucket(alias string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newBucket(alias).id
}

// Grant sets a key's permissions on the bucket with this alias.
func (g *Garage) Grant(alias, keyID string, p Perm) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byAlias(alias).perms[keyID] = p
}

// Writes is how many requests that change state (every POST) Garage received
// since it started or was rebuilt, answered or refused.
func (g *Garage) Writes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// Requests is how many requests of one operation (GetKeyInfo, ...) Garage
// received.
func (g *Garage) Requests(operation string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests[operation]
}

func (g *Garage) byAlias(alias string) *bucket {
	if id, ok := g.aliases[alias]; ok {
		return g.buckets[id]
	}
	return nil
}

func (g *Garage) newKey(name string) *key {
	k := &key{id: "GK" + randomHex(12), secret: randomHex(32), name: name, created: time.Now().UTC()}
	g.keys[k.id] = k
	return k
}

func (g *Garage) newBucket(alias string) *bucket {
	b := &bucket{id: randomHex(32), created: time.Now().UTC(), perms: map[string]Perm{}}
	if alias != "" {
		b.aliases = []string{alias}
		g.aliases[alias] = b.id
	}
	g.buckets[b.id] = b
	return b
}

// answer is a response the double gives: a status and a JSON body.
type answer struct {
	status int
	body   any
}

// garageError is Garage's error body. Garage's document describes only its
// 200 and 500 answers; its 400, 403, 404 and 409 answers carry this body.
type garageError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Region  string `json:"region"`
	Path    string `json:"path"`
}

func fail(status int, code, format string, args ...any) answer {
	return answer{status: status, body: garageError{Code: code, Message: fmt.Sprintf(format, args...), Region: "garage"}}
}

const maxBody = 1 << 20

func (g *Garage) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		g.write(w, r, nil, fail(http.StatusBadRequest, "InvalidRequest", "read the body: %v", err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	route, params, err := g.router.FindRoute(r)
	if err != nil {
		g.drift(fmt.Errorf("%s %s: no such operation in the document: %w", r.Method, r.URL.Path, err))
		g.write(w, r, nil, fail(http.StatusNotFound, "InvalidRequest", "no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	op := route.Operation.OperationID
	g.mu.Lock()
	g.requests[op]++
	if r.Method == http.MethodPost {
		g.writes++
	}
	g.mu.Unlock()

	in := &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			MultiError: true,
			// The token is checked below, as Garage does once the request
			// has parsed, with the answers Garage gives.
			AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
		},
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		g.drift(fmt.Errorf("request %s: %w", op, err))
		g.write(w, r, route, fail(http.StatusBadRequest, "InvalidRequest", "request does not follow the API: %v", err))
		return
	}
	if err := undeclaredQuery(route.Operation, r); err != nil {
		g.drift(fmt.Errorf("request %s: %w", op, err))
		g.write(w, r, route, fail(http.StatusBadRequest, "InvalidRequest", "%v", err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if refusal := checkToken(r.Header.Values("Authorization"), g.Token); refusal != "" {
		g.write(w, r, route, fail(http.StatusForbidden, "AccessDenied", "Forbidden: %s", refusal))
		return
	}
	g.write(w, r, route, g.handle(op, r, body))
}

// checkToken is Garage's check of the admin token (v2.0.0,
// verify_authorization): why it refuses the request, or "".
func checkToken(header []string, token string) string {
	if len(header) == 0 {
		return "Bearer token must be provided in Authorization header"
	}
	given, ok := strings.CutPrefix(header[0], "Bearer ")
	if !ok {
		return "Invalid Authorization header"
	}
	if strings.TrimSpace(given) != token {
		return "Invalid bearer token"
	}
	return ""
}

// undeclaredQuery refuses a query parameter the operation does not declare:
// Garage would ignore it, so a misspelt one would silently change the request.
func undeclaredQuery(op *openapi3.Operation, r *http.Request) error {
	for name := range r.URL.Query() {
		if op.Parameters.GetByInAndName(openapi3.ParameterInQuery, name) == nil {
			return fmt.Errorf("query parameter %q is not declared by %s", name, op.OperationID)
		}
	}
	return nil
}

// write validates the answer against the document and sends it. An answer
// with a status the document does not describe must be Garage's error body.
func (g *Garage) write(w http.ResponseWriter, r *http.Request, route *routers.Route, a answer) {
	if e, ok := a.body.(garageError); ok {
		e.Path = r.URL.Path
		a.body = e
	}
	raw, err := json.Marshal(a.body)
	if err != nil {
		g.drift(fmt.Errorf("encode the answer: %w", err))
		http.Error(w, "encode the answer", http.StatusInternalServerError)
		return
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if route != nil {
		if err := g.validateResponse(r, route, a.status, header, raw); err != nil {
			g.drift(fmt.Errorf("response to %s: %w", route.Operation.OperationID, err))
		}
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(raw)
}

func (g *Garage) validateResponse(r *http.Request, route *routers.Route, status int, header http.Header, raw []byte) error {
	if route.Operation.Responses.Status(status) == nil {
		var e garageError
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Code == "" || e.Message == "" || e.Path == "" {
			return fmt.Errorf("status %d is not in the document and the body is not Garage's error body: %s", status, raw)
		}
		return nil
	}
	return openapi3filter.ValidateResponse(r.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(raw)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

// decodeStrict decodes a request body, refusing fields Garage's types do not
// have: the document allows them, and Garage ignores them, so a misspelt
// field would silently be dropped. Go matches field names case-insensitively,
// Garage does not, so every object's names are compared exactly first.
func decodeStrict(body []byte, v any) error {
	var generic any
	if err := json.Unmarshal(body, &generic); err != nil {
		return err
	}
	if err := exactNames(generic, reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func exactNames(value any, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	obj, ok := value.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = t.Field(i).Type
	}
	for name, v := range obj {
		ft, ok := fields[name]
		if !ok {
			return fmt.Errorf("unknown field %q%s", name, at)
		}
		if err := exactNames(v, ft, " in "+name); err != nil {
			return err
		}
	}
	return nil
}

func (g *Garage) handle(op string, r *http.Request, body []byte) answer {
	g.mu.Lock()
	defer g.mu.Unlock()
	q, refused := garageQuery(r.URL.RawQuery)
	if refused != nil {
		return *refused
	}
	switch op {
	case "ListKeys":
		return g.listKeys()
	case "GetKeyInfo":
		showSecret, refused := flag(q, "showSecretKey", false)
		if refused != nil {
			return *refused
		}
		return g.getKeyInfo(param(q, "id"), param(q, "search"), showSecret)
	case "CreateKey":
		var req struct {
			Name         *string         `json:"name"`
			Allow        json.RawMessage `json:"allow"`
			Deny         json.RawMessage `json:"deny"`
			Expiration   *string         `json:"expiration"`
			NeverExpires bool            `json:"neverExpires"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request CreateKey: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		name := "Unnamed key"
		if req.Name != nil {
			name = *req.Name
		}
		return answer{http.StatusOK, g.keyInfo(g.newKey(name), true)}
	case "ImportKey":
		var req struct {
			AccessKeyID     string  `json:"accessKeyId"`
			SecretAccessKey string  `json:"secretAccessKey"`
			Name            *string `json:"name"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request ImportKey: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		return g.importKey(req.AccessKeyID, req.SecretAccessKey, req.Name)
	case "ListBuckets":
		return g.listBuckets()
	case "GetBucketInfo":
		return g.getBucketInfo(param(q, "id"), param(q, "globalAlias"), param(q, "search"))
	case "CreateBucket":
		var req struct {
			GlobalAlias *string         `json:"globalAlias"`
			LocalAlias  json.RawMessage `json:"localAlias"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request CreateBucket: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		if len(req.LocalAlias) > 0 && string(req.LocalAlias) != "null" {
			g.drift(fmt.Errorf("CreateBucket with a local alias: the double does not model local aliases"))
			return fail(http.StatusBadRequest, "InvalidRequest", "local aliases are not modelled")
		}
		return g.createBucket(req.GlobalAlias)
	case "AllowBucketKey":
		var req struct {
			BucketID    string `json:"bucketId"`
			AccessKeyID string `json:"accessKeyId"`
			Permissions struct {
				Read  bool `json:"read"`
				Write bool `json:"write"`
				Owner bool `json:"owner"`
			} `json:"permissions"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request AllowBucketKey: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		return g.allowBucketKey(req.BucketID, req.AccessKeyID, Perm{Read: req.Permissions.Read, Write: req.Permissions.Write, Owner: req.Permissions.Owner})
	default:
		g.drift(fmt.Errorf("operation %s is in the document but not modelled by the double", op))
		return fail(http.StatusInternalServerError, "InternalError", "%s is not modelled", op)
	}
}

var (
	// Garage reads hexadecimal in either case (Rust's hex::decode).
	keyIDFormat  = regexp.MustCompile(`^GK[0-9a-fA-F]{24}$`)
	secretFormat = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	bucketIDForm = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	// Garage's bucket names: S3's rules, lowercase letters, digits, dots and
	// hyphens, 3 to 63 of them, starting and ending with a letter or digit.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// validBucketName is Garage's own test of a bucket name (v2.0.0,
// is_valid_bucket_name, punycode not allowed, as by default): S3's
// characters, not an IP address, no label opening with xn--, not ending in
// -s3alias. Unlike S3, Garage lets two dots stand together.
func validBucketName(name string) bool {
	return bucketName.MatchString(name) &&
		net.ParseIP(name) == nil && !strings.HasPrefix(name, "xn--") && !strings.Contains(name, ".xn--") &&
		!strings.HasSuffix(name, "-s3alias")
}

func (g *Garage) listKeys() answer {
	items := make([]map[string]any, 0, len(g.keys))
	for _, k := range g.sortedKeys() {
		expired, expiration := k.expiry()
		items = append(items, map[string]any{
			"id": k.id, "name": k.name, "expired": expired,
			"created": k.created.Format(time.RFC3339), "expiration": expiration,
		})
	}
	return answer{http.StatusOK, items}
}

func (g *Garage) sortedKeys() []*key {
	keys := make([]*key, 0, len(g.keys))
	for _, k := range g.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].id < keys[j].id })
	return keys
}

func (g *Garage) getKeyInfo(id, search *string, showSecret bool) answer {
	var k *key
	switch {
	case id != nil && search == nil:
		k = g.keys[*id]
		if k == nil {
			return fail(http.StatusNotFound, "NoSuchAccessKey", "Access key not found: %s", *id)
		}
	case id == nil && search != nil:
		// Garage matches a key by the start of its ID or by its whole name,
		// either without regard to case, and looks at the first ten matches.
		pattern := strings.ToLower(*search)
		var found []*key
		for _, c := range g.sortedKeys() {
			if strings.HasPrefix(strings.ToLower(c.id), pattern) || strings.ToLower(c.name) == pattern {
				found = append(found, c)
			}
		}
		switch {
		case len(found) == 0:
			return fail(http.StatusNotFound, "NoSuchAccessKey", "Access key not found: %s", *search)
		case len(found) > 1:
			return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: %d matching keys", min(len(found), 10))
		}
		k = found[0]
	default:
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Either id or search must be provided (but not both)")
	}
	return answer{http.StatusOK, g.keyInfo(k, showSecret)}
}

// garageQuery is a request's query as Garage's router reads it: a parameter
// given with an empty value counts as not given, and one given twice with a
// value is refused.
func garageQuery(raw string) (map[string]string, *answer) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: %v", err)
		return nil, &a
	}
	out := map[string]string{}
	for name, vs := range values {
		for _, v := range vs {
			if v == "" {
				continue
			}
			if _, twice := out[name]; twice {
				a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Query parameter repeated: '%s'", name)
				return nil, &a
			}
			out[name] = v
		}
	}
	return out, nil
}

// param is a query parameter, nil when not given.
func param(q map[string]string, name string) *string {
	v, ok := q[name]
	if !ok {
		return nil
	}
	return &v
}

// flag is a boolean query parameter as Garage parses it: true or false, and
// def when not given.
func flag(q map[string]string, name string, def bool) (bool, *answer) {
	switch v, ok := q[name]; {
	case !ok:
		return def, nil
	case v == "true" || v == "false":
		return v == "true", nil
	default:
		a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Failed to parse query parameter")
		return false, &a
	}
}

func (g *Garage) keyInfo(k *key, showSecret bool) map[string]any {
	buckets := []map[string]any{}
	for _, b := range g.sortedBuckets() {
		// Garage lists every bucket the key has an entry on, whatever its
		// flags say.
		p, ok := b.perms[k.id]
		if !ok {
			continue
		}
		buckets = append(buckets, map[string]any{
			"id": b.id, "globalAliases": slices.Clone(b.aliases), "localAliases": []string{},
			"permissions": map[string]bool{"read": p.Read, "write": p.Write, "owner": p.Owner},
		})
	}
	expired, expiration := k.expiry()
	info := map[string]any{
		"accessKeyId": k.id, "name": k.name, "expired": expired,
		"created": k.created.Format(time.RFC3339), "expiration": expiration,
		"permissions": map[string]bool{"createBucket": false},
		"buckets":     buckets,
	}
	if showSecret {
		info["secretAccessKey"] = k.secret
	}
	return info
}

func (g *Garage) importKey(id, secret string, name *string) answer {
	if _, ok := g.keys[id]; ok {
		return fail(http.StatusConflict, "KeyAlreadyExists", "Key %s already exists in data store. Even if it is deleted, we can't let you create a new key with the same ID. Sorry.", id)
	}
	if !keyIDFormat.MatchString(id) || !secretFormat.MatchString(secret) {
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Invalid key format")
	}
	n := "Imported key"
	if name != nil {
		n = *name
	}
	k := &key{id: id, secret: secret, name: n, created: time.Now().UTC()}
	g.keys[id] = k
	return answer{http.StatusOK, g.keyInfo(k, false)}
}

func (g *Garage) sortedBuckets() []*bucket {
	bs := make([]*bucket, 0, len(g.buckets))
	for _, b := range g.buckets {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].id < bs[j].id })
	return bs
}

func (g *Garage) listBuckets() answer {
	items := make([]map[string]any, 0, len(g.buckets))
	for _, b := range g.sortedBuckets() {
		items = append(items, map[string]any{
			"id": b.id, "created": b.created.Format(time.RFC3339),
			"globalAliases": slices.Clone(b.aliases), "localAliases": []any{},
		})
	}
	return answer{http.StatusOK, items}
}

func (g *Garage) getBucketInfo(id, alias, search *string) answer {
	var b *bucket
	var asked string
	switch {
	case id != nil && alias == nil && search == nil:
		if !bucketIDForm.MatchString(*id) {
			return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Invalid bucket id")
		}
		asked, b = *id, g.buckets[strings.ToLower(*id)]
	case id == nil && alias != nil && search == nil:
		asked, b = *alias, g.byAlias(*alias)
	case id == nil && alias == nil && search != nil:
		asked = *search
		if b = g.byAlias(*search); b == nil {
			found, err := g.bucketsByIDPrefix(*search)
			if err != nil {
				return *err
			}
			if len(found) > 1 {
				return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Several matching buckets: %s", *search)
			}
			if len(found) == 1 {
				b = found[0]
			}
		}
	default:
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Either id, globalAlias or search must be provided (but not several of them)")
	}
	if b == nil {
		return fail(http.StatusNotFound, "NoSuchBucket", "Bucket not found: %s", asked)
	}
	return answer{http.StatusOK, g.bucketInfo(b)}
}

// bucketsByIDPrefix is Garage's search of bucket IDs (v2.0.0): the
// pattern's whole hexadecimal bytes (an odd last digit aside, either case)
// say where to start, Garage looks at the first ten buckets from there, and
// keeps those whose lowercase ID begins with the pattern as given. A pattern
// shorter than a byte, or not hexadecimal, names no bucket.
func (g *Garage) bucketsByIDPrefix(pattern string) ([]*bucket, *answer) {
	start, err := hex.DecodeString(pattern[:len(pattern)&^1])
	if err != nil || len(pattern) < 2 {
		a := fail(http.StatusNotFound, "NoSuchBucket", "Bucket not found: %s", pattern)
		return nil, &a
	}
	if len(start) > 32 {
		a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: invalid length")
		return nil, &a
	}
	from := hex.EncodeToString(start)
	var found []*bucket
	looked := 0
	for _, c := range g.sortedBuckets() {
		if c.id < from {
			continue
		}
		if looked++; looked > 10 {
			break
		}
		if strings.HasPrefix(c.id, pattern) {
			found = append(found, c)
		}
	}
	return found, nil
}

func (g *Garage) bucketInfo(b *bucket) map[string]any {
	keys := []map[string]any{}
	ids := make([]string, 0, len(b.perms))
	for id := range b.perms {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		k := g.keys[id]
		if k == nil {
			continue
		}
		p := b.perms[id]
		keys = append(keys, map[string]any{
			"accessKeyId": id, "name": k.name, "bucketLocalAliases": []string{},
			"permissions": map[string]bool{"read": p.Read, "write": p.Write, "owner": p.Owner},
		})
	}
	return map[string]any{
		"id": b.id, "created": b.created.Format(time.RFC3339), "globalAliases": slices.Clone(b.aliases),
		"websiteAccess": false, "websiteConfig": nil, "keys": keys,
		"objects": 0, "bytes": 0, "unfinishedUploads": 0, "unfinishedMultipartUploads": 0,
		"unfinishedMultipartUploadParts": 0, "unfinishedMultipartUploadBytes": 0,
		"quotas": map[string]any{"maxSize": nil, "maxObjects": nil},
	}
}

func (g *Garage) createBucket(alias *string) answer {
	a := ""
	if alias != nil {
		a = *alias
		if !validBucketName(a) {
			return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: %s: Invalid bucket name", a)
		}
		if g.byAlias(a) != nil {
			return fail(http.StatusConflict, "BucketAlreadyExists", "Bucket already exists")
		}
	}
	return answer{http.StatusOK, g.bucketInfo(g.newBucket(a))}
}

// allowBucketKey follows Garage: flags sent true are set, flags sent false
// keep their value.
func (g *Garage) allowBucketKey(bucketID, keyID string, p Perm) answer {
	if !bucketIDForm.MatchString(bucketID) {
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Invalid bucket id")
	}
	b := g.buckets[strings.ToLower(bucketID)]
	if b == nil {
		return fail(http.StatusNotFound, "NoSuchBucket", "Bucket not found: %s", bucketID)
	}
	if g.keys[keyID] == nil {
		return fail(http.StatusNotFound, "NoSuchAccessKey", "Access key not found: %s", keyID)
	}
	cur := b.perms[keyID]
	cur.Read = cur.Read || p.Read
	cur.Write = cur.Write || p.Write
	cur.Owner = cur.Owner || p.Owner
	b.perms[keyID] = cur
	return answer{http.StatusOK, g.bucketInfo(b)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

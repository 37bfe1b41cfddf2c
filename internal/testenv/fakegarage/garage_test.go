package fakegarage

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// drifts collects what the double reports instead of failing the test.
type drifts struct {
	mu   sync.Mutex
	errs []error
}

func (d *drifts) report(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

func (d *drifts) all() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

func call(t *testing.T, g *Garage, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func TestDocumentIsFoundAndItsQueryParametersCorrected(t *testing.T) {
	path, err := DocumentPath()
	if err != nil {
		t.Fatal(err)
	}
	_, corrected, err := LoadDocument(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GET /v2/GetKeyInfo", "GET /v2/GetBucketInfo"} {
		if !slices.Contains(corrected, want) {
			t.Errorf("%s was not corrected; corrected: %v", want, corrected)
		}
	}
}

func TestAbsentDocumentIsNamed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	_, err := DocumentPath()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "third_party", "garage", "garage-admin-v2.json")) {
		t.Fatalf("want an error naming the absent document, got %v", err)
	}
}

func TestRequestsThatBreakTheDocumentAreRefused(t *testing.T) {
	cases := []struct {
		name, method, path, body string
	}{
		{name: "import without its secret", method: "POST", path: "/v2/ImportKey", body: `{"accessKeyId":"GK0123456789abcdef01234567"}`},
		{name: "permission of the wrong type", method: "POST", path: "/v2/AllowBucketKey", body: `{"bucketId":"b","accessKeyId":"k","permissions":{"read":"yes"}}`},
		{name: "field Garage does not have", method: "POST", path: "/v2/CreateBucket", body: `{"globalalias":"media"}`},
		{name: "nested field in the wrong case", method: "POST", path: "/v2/AllowBucketKey", body: `{"bucketId":"b","accessKeyId":"k","permissions":{"Read":true}}`},
		{name: "query parameter not declared", method: "GET", path: "/v2/GetBucketInfo?alias=media"},
		{name: "boolean that is not one", method: "GET", path: "/v2/GetKeyInfo?id=GK1&showSecretKey=maybe"},
		{name: "operation the API lacks", method: "GET", path: "/v2/GetEverything"},
		{name: "wrong method", method: "GET", path: "/v2/ImportKey"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d drifts
			g := New(t, OnDrift(d.report))
			status, _ := call(t, g, c.method, c.path, g.Token, c.body)
			if status < 400 || status >= 500 {
				t.Errorf("status %d, want a refusal", status)
			}
			if len(d.all()) == 0 {
				t.Error("no drift reported")
			}
		})
	}
}

// A well-formed request without the admin token is refused as Garage
// refuses it: 403, with its reason, and no drift.
func TestWrongTokenIsForbiddenAsGarageAnswers(t *testing.T) {
	var d drifts
	g := New(t, OnDrift(d.report))
	for authorization, reason := range map[string]string{
		"":                     "Forbidden: Bearer token must be provided in Authorization header",
		"Basic " + g.Token:     "Forbidden: Invalid Authorization header",
		"Bearer not-the-token": "Forbidden: Invalid bearer token",
	} {
		req, _ := http.NewRequest(http.MethodGet, g.URL+"/v2/ListKeys", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || body["code"] != "AccessDenied" || body["message"] != reason {
			t.Errorf("Authorization %q: %d %v, want 403 %q", authorization, resp.StatusCode, body, reason)
		}
	}
	if errs := d.all(); len(errs) != 0 {
		t.Errorf("a well-formed request without the token is no drift: %v", errs)
	}
}

func TestStateFollowsGarage(t *testing.T) {
	g := New(t) // any drift fails this test
	tok := g.Token

	status, created := call(t, g, "POST", "/v2/CreateKey", tok, `{"name":"media"}`)
	if status != 200 || created["secretAccessKey"] == nil {
		t.Fatalf("CreateKey: %d %v", status, created)
	}
	id := created["accessKeyId"].(string)

	status, _ = call(t, g, "POST", "/v2/ImportKey", tok, `{"accessKeyId":"`+id+`","secretAccessKey":"`+strings.Repeat("a", 64)+`"}`)
	if status != http.StatusConflict {
		t.Errorf("importing a held id: %d, want 409", status)
	}
	status, _ = call(t, g, "POST", "/v2/ImportKey", tok, `{"accessKeyId":"nope","secretAccessKey":"x"}`)
	if status != http.StatusBadRequest {
		t.Errorf("importing a malformed key: %d, want 400", status)
	}

	status, info := call(t, g, "GET", "/v2/GetKeyInfo?id="+id, tok, "")
	if status != 200 || info["secretAccessKey"] != nil {
		t.Errorf("GetKeyInfo without showSecretKey: %d %v", status, info)
	}
	status, _ = call(t, g, "GET", "/v2/GetKeyInfo?id=GK000000000000000000000000", tok, "")
	if status != http.StatusNotFound {
		t.Errorf("GetKeyInfo of an absent key: %d, want 404", status)
	}

	status, _ = call(t, g, "GET", "/v2/GetBucketInfo?globalAlias=media", tok, "")
	if status != http.StatusNotFound {
		t.Errorf("GetBucketInfo of an absent alias: %d, want 404", status)
	}
	status, b := call(t, g, "POST", "/v2/CreateBucket", tok, `{"globalAlias":"media"}`)
	if status != 200 {
		t.Fatalf("CreateBucket: %d %v", status, b)
	}
	status, _ = call(t, g, "POST", "/v2/CreateBucket", tok, `{"globalAlias":"media"}`)
	if status != http.StatusConflict {
		t.Errorf("CreateBucket on a taken alias: %d, want 409", status)
	}
	refusedNames := []string{"Not_A_Bucket", "10.0.0.1", "xn--abc", "a.xn--b", "media-s3alias", "-media"}
	for _, name := range refusedNames {
		if status, _ = call(t, g, "POST", "/v2/CreateBucket", tok, `{"globalAlias":"`+name+`"}`); status != http.StatusBadRequest {
			t.Errorf("CreateBucket named %s: %d, want 400 as Garage answers", name, status)
		}
	}

	bucketID := b["id"].(string)
	status, _ = call(t, g, "POST", "/v2/AllowBucketKey", tok, `{"bucketId":"`+bucketID+`","accessKeyId":"`+id+`","permissions":{"read":true,"write":true,"owner":false}}`)
	if status != 200 {
		t.Fatalf("AllowBucketKey: %d", status)
	}
	g.Grant("media", id, Perm{Read: true, Write: true, Owner: true})
	call(t, g, "POST", "/v2/AllowBucketKey", tok, `{"bucketId":"`+bucketID+`","accessKeyId":"`+id+`","permissions":{"read":true,"write":false,"owner":false}}`)
	if _, perms, _ := g.Bucket("media"); perms[id] != (Perm{Read: true, Write: true, Owner: true}) {
		t.Errorf("a flag sent false must keep its value, got %+v", perms[id])
	}
	status, _ = call(t, g, "POST", "/v2/AllowBucketKey", tok, `{"bucketId":"`+bucketID+`","accessKeyId":"GK000000000000000000000000","permissions":{"read":true}}`)
	if status != http.StatusNotFound {
		t.Errorf("AllowBucketKey for an absent key: %d, want 404", status)
	}

	status, info = call(t, g, "GET", "/v2/GetKeyInfo?search=media&showSecretKey=true", tok, "")
	if status != 200 || info["secretAccessKey"] != created["secretAccessKey"] || len(info["buckets"].([]any)) != 1 {
		t.Errorf("GetKeyInfo by search: %d %v", status, info)
	}
	status, _ = call(t, g, "GET", "/v2/GetBucketInfo?id="+bucketID, tok, "")
	if status != 200 {
		t.Errorf("GetBucketInfo by id: %d", status)
	}
	for _, path := range []string{"/v2/ListKeys", "/v2/ListBuckets"} {
		req, _ := http.NewRequest(http.MethodGet, g.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %v %v", path, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}

	// Garage, unlike S3, lets two dots stand together.
	if status, _ = call(t, g, "POST", "/v2/CreateBucket", tok, `{"globalAlias":"a..b"}`); status != http.StatusOK {
		t.Errorf("CreateBucket named a..b: %d, want 200 as Garage answers", status)
	}
	// Hexadecimal in either case, as Garage reads it.
	upper := "GK" + strings.Repeat("AB", 12)
	status, imported := call(t, g, "POST", "/v2/ImportKey", tok, `{"accessKeyId":"`+upper+`","secretAccessKey":"`+strings.Repeat("CD", 32)+`"}`)
	if status != http.StatusOK || imported["accessKeyId"] != upper {
		t.Errorf("ImportKey of an upper-case key: %d %v", status, imported)
	}
	// A hidden secret is left out, not null; a bucket the key holds an
	// entry on is listed whatever its flags.
	call(t, g, "POST", "/v2/AllowBucketKey", tok, `{"bucketId":"`+bucketID+`","accessKeyId":"`+upper+`","permissions":{"read":false,"write":false,"owner":false}}`)
	status, info = call(t, g, "GET", "/v2/GetKeyInfo?id="+upper, tok, "")
	if _, shown := info["secretAccessKey"]; status != 200 || shown || len(info["buckets"].([]any)) != 1 {
		t.Errorf("GetKeyInfo of a key with no flag set: %d %v", status, info)
	}

	if g.Writes() == 0 || g.Requests("CreateBucket") != 3+len(refusedNames) {
		t.Errorf("counts: writes %d, CreateBucket %d", g.Writes(), g.Requests("CreateBucket"))
	}
	g.Rebuild()
	if g.KeyCount() != 0 || g.BucketCount() != 0 || g.Writes() != 0 {
		t.Error("a rebuilt Garage holds nothing")
	}
}

func TestResponseDriftIsCaught(t *testing.T) {
	var d drifts
	g := New(t, OnDrift(d.report))
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v2/GetKeyInfo?id=GK1", nil)
	route, _, err := g.router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if err := g.validateResponse(req, route, 200, h, []byte(`{"accessKeyId":"GK1"}`)); err == nil {
		t.Error("a key answer without its required fields passed")
	}
	if err := g.validateResponse(req, route, 404, h, []byte(`{"oops":true}`)); err == nil {
		t.Error("an undocumented status without Garage's error body passed")
	}
}

// The double looks keys and buckets up as Garage does: a search matches a
// key's ID by its start or its name whole, without regard to case, and a
// bucket by its global alias or the start of its ID; an empty parameter is a
// parameter given.
func TestLookupsFollowGarage(t *testing.T) {
	g := New(t)
	tok := g.Token
	_, media := call(t, g, "POST", "/v2/CreateKey", tok, `{"name":"media"}`)
	call(t, g, "POST", "/v2/CreateKey", tok, `{"name":"media-backup"}`)
	_, bucket := call(t, g, "POST", "/v2/CreateBucket", tok, `{"globalAlias":"photos"}`)
	call(t, g, "POST", "/v2/CreateBucket", tok, `{"globalAlias":"videos"}`)
	mediaID, bucketID := media["accessKeyId"].(string), bucket["id"].(string)

	for _, c := range []struct {
		query  string
		status int
		id     string
	}{
		{"/v2/GetKeyInfo?search=MEDIA", 200, mediaID},
		{"/v2/GetKeyInfo?search=" + strings.ToLower(mediaID[:8]), 200, mediaID},
		{"/v2/GetKeyInfo?search=medi", http.StatusNotFound, ""},
		{"/v2/GetKeyInfo?search=GK", http.StatusBadRequest, ""},
		// Garage takes a parameter given empty as not given, and refuses
		// one given twice and a flag that is not true or false.
		{"/v2/GetKeyInfo?id=", http.StatusBadRequest, ""},
		{"/v2/GetKeyInfo?id=&search=media", 200, mediaID},
		{"/v2/GetKeyInfo?search=media&search=media", http.StatusBadRequest, ""},
		{"/v2/GetKeyInfo?search=media&showSecretKey=1", http.StatusBadRequest, ""},
		{"/v2/GetKeyInfo?search=media&showSecretKey=false", 200, mediaID},
		{"/v2/GetKeyInfo", http.StatusBadRequest, ""},
		{"/v2/GetBucketInfo?search=photos", 200, bucketID},
		{"/v2/GetBucketInfo?search=" + bucketID[:9], 200, bucketID},
		{"/v2/GetBucketInfo?search=" + strings.ToUpper(bucketID), http.StatusNotFound, ""},
		{"/v2/GetBucketInfo?id=" + strings.ToUpper(bucketID), 200, bucketID},
		{"/v2/GetBucketInfo?search=p", http.StatusNotFound, ""},
		{"/v2/GetBucketInfo?search=", http.StatusBadRequest, ""},
		{"/v2/GetBucketInfo?search=zz", http.StatusNotFound, ""},
		{"/v2/GetBucketInfo?id=&globalAlias=photos", 200, bucketID},
	} {
		status, info := call(t, g, "GET", c.query, tok, "")
		got, _ := info["accessKeyId"].(string)
		if strings.Contains(c.query, "Bucket") {
			got, _ = info["id"].(string)
		}
		if status != c.status || got != c.id {
			t.Errorf("%s: %d %q, want %d %q", c.query, status, got, c.status, c.id)
		}
	}
}

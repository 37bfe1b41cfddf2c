package releasepath

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// releasesAnswer is a GET /releases answer in the gate's published shape.
const releasesAnswer = `{"readAt":"2026-11-30T10:00:00Z","truncated":false,"applications":[
 {"namespace":"auth-system","application":"auth","members":[{"process":"auth-api","revision":"` + revA + `"}],
  "migration":null,"record":{"serving":"` + revA + `","pinned":null,"since":null,"migrated":null,
  "warmup":{"revision":"` + revA + `","warmed":true,"failed":null}},"unreadable":null},
 {"namespace":"shop-system","application":"shop","members":[],"migration":null,"record":{"serving":null,"pinned":"` + revB + `","since":"2026-11-30T09:00:00Z","migrated":"` + revB + `",
  "warmup":{"revision":"` + revB + `","warmed":false,"failed":{"request":"shop.example/cart","status":503}}},"unreadable":null},
 {"namespace":"new-system","application":"new","members":[],"migration":null,"record":null,"unreadable":"no inputs"}]}`

var revisionPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

func TestDecodeReleases(t *testing.T) {
	got, err := DecodeReleases(strings.NewReader(releasesAnswer))
	if err != nil {
		t.Fatal(err)
	}
	if w := got["auth-system/auth"]; w.Revision != revA || !w.Warmed || w.Failed != nil {
		t.Errorf("auth: %+v", w)
	}
	if w := got["shop-system/shop"]; w.Warmed || w.Failed == nil || w.Failed.Request != "shop.example/cart" || w.Failed.Status != 503 {
		t.Errorf("shop: %+v", w)
	}
	if _, ok := got["new-system/new"]; ok || len(got) != 2 {
		t.Errorf("an Application without a record has a warmup: %v", got)
	}
	for name, bad := range map[string]string{
		"not JSON":          `<html>`,
		"two values":        `{"applications":[]} {}`,
		"no list":           `{"readAt":"x"}`,
		"bad revision":      `{"applications":[{"namespace":"a","application":"b","record":{"warmup":{"revision":"sha256:xyz","warmed":true}}}]}`,
		"failed, no status": `{"applications":[{"namespace":"a","application":"b","record":{"warmup":{"revision":"` + revA + `","failed":{"request":"x"}}}}]}`,
		"status 600":        `{"applications":[{"namespace":"a","application":"b","record":{"warmup":{"revision":"` + revA + `","failed":{"request":"x","status":600}}}}]}`,
		"no namespace":      `{"applications":[{"application":"b"}]}`,
		// Held to the gate's schema: exact keys, none unknown.
		"a key in another case":  strings.Replace(releasesAnswer, `"applications"`, `"APPLICATIONS"`, 1),
		"an unknown key":         strings.Replace(releasesAnswer, `{`, `{"x":1,`, 1),
		"a warmup's unknown key": strings.Replace(releasesAnswer, `"warmed":true`, `"warmed":true,"bogus":1`, 1),
	} {
		if _, err := DecodeReleases(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestGateClient(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/releases" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(releasesAnswer))
	}))
	defer srv.Close()
	g := NewGateClient(srv.URL + "/")
	if got, err := g.Releases(context.Background()); err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	status = http.StatusServiceUnavailable
	if _, err := g.Releases(context.Background()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503: %v", err)
	}
	srv.Close()
	if _, err := g.Releases(context.Background()); err == nil {
		t.Fatal("a gate that is down answered")
	}
}

func FuzzDecodeReleases(f *testing.F) {
	f.Add([]byte(releasesAnswer))
	f.Add([]byte(`{"applications":[]}`))
	f.Add([]byte(`{"applications":[{"namespace":"a","application":"b","record":{"warmup":{"revision":"` + revA + `","failed":{"request":"x","status":0}}}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeReleases(strings.NewReader(string(body)))
		if err != nil {
			return
		}
		for key, w := range got {
			if !revisionPattern.MatchString(w.Revision) || (w.Failed != nil && w.Warmed) || !strings.Contains(key, "/") {
				t.Fatalf("%s: %+v", key, w)
			}
		}
	})
}

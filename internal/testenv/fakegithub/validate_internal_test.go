package fakegithub

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAnAnswerOutsideTheDescriptionIsReported feeds the answer check answers
// the double must never give, and ones GitHub gives that its description
// states only in prose, to see the first reported and the second not.
func TestAnAnswerOutsideTheDescriptionIsReported(t *testing.T) {
	s, err := Start("127.0.0.1:0", OnViolation(func(error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list := s.operations["GET /repos/{owner}/{repo}/deployments"]
	blob := s.operations["GET /repos/{owner}/{repo}/git/blobs/{file_sha}"]
	jsonHeader := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	rawHeader := http.Header{"Content-Type": {"application/vnd.github.raw"}}
	cases := []struct {
		name     string
		accept   string
		status   int
		header   http.Header
		body     string
		reported bool
	}{
		{"an empty list", "", http.StatusOK, jsonHeader, `[]`, false},
		{"a deployment without its required fields", "", http.StatusOK, jsonHeader, `[{"id":1}]`, true},
		{"an object for a list", "", http.StatusOK, jsonHeader, `{}`, true},
		{"a status the operation does not describe, with GitHub's error body", "", http.StatusBadGateway, jsonHeader, `{"message":"Bad Gateway","documentation_url":"https://docs.github.com/rest","status":"502"}`, false},
		{"a status the operation does not describe, without it", "", http.StatusBadGateway, jsonHeader, `oops`, true},
		{"an error body without a message", "", http.StatusUnauthorized, jsonHeader, `{"status":"401"}`, true},
		{"304 to a conditional read", "", http.StatusNotModified, http.Header{}, ``, false},
		{"304 with a body", "", http.StatusNotModified, http.Header{}, `[]`, true},
	}
	for _, tc := range cases {
		before := len(s.Violations())
		r := httptest.NewRequest(http.MethodGet, "/repos/acme/app/deployments", nil)
		s.checkAnswer(r, list, tc.status, tc.header, []byte(tc.body))
		if got := len(s.Violations()) - before; (got > 0) != tc.reported {
			t.Errorf("%s: %d violations reported, want reported=%v: %v", tc.name, got, tc.reported, s.Violations()[before:])
		}
	}
	// The raw media type answers only a request that asks for it.
	for accept, reported := range map[string]bool{"application/vnd.github.v3.raw": false, "application/vnd.github+json": true} {
		before := len(s.Violations())
		r := httptest.NewRequest(http.MethodGet, "/repos/acme/app/git/blobs/e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", nil)
		r.Header.Set("Accept", accept)
		s.checkAnswer(r, blob, http.StatusOK, rawHeader, []byte("bytes"))
		if got := len(s.Violations()) - before; (got > 0) != reported {
			t.Errorf("raw answer to Accept %s: %d violations, want reported=%v", accept, got, reported)
		}
	}
}

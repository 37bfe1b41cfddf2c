package release

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeQuestion(t *testing.T) {
	body := func(name, md string) string {
		return `{"name":"` + name + `","namespace":"auth-system","phase":"Progressing","checksum":"x","metadata":` + md + `}`
	}
	md := `{"application":"auth","process":"auth-api","revision":"` + rev + `"}`
	q, err := DecodeQuestionBytes([]byte(body("auth-api", md)))
	if err != nil {
		t.Fatal(err)
	}
	if q != (Question{Namespace: "auth-system", Application: "auth", Process: "auth-api", Revision: rev, Phase: "Progressing"}) || q.Tag() != tag {
		t.Fatalf("decoded %+v", q)
	}
	if _, err := DecodeQuestionBytes([]byte(`{"name":"auth-api","namespace":"auth-system","newField":1,"metadata":` + md + `}`)); err != nil {
		t.Fatalf("a field Flagger adds later was refused: %v", err)
	}

	cases := []struct{ name, body, err string }{
		{"bad JSON", `{"name":`, "not a JSON object"},
		{"not an object", `[]`, "not a JSON object"},
		{"two values", body("auth-api", md) + `{}`, "more than one"},
		{"missing metadata", `{"name":"auth-api","namespace":"auth-system"}`, "no metadata"},
		{"metadata without application", body("auth-api", `{"process":"auth-api","revision":"`+rev+`"}`), "no application"},
		{"metadata without process", body("auth-api", `{"application":"auth","revision":"`+rev+`"}`), "no process"},
		{"metadata without revision", body("auth-api", `{"application":"auth","process":"auth-api"}`), "no revision"},
		{"name is not the process", body("auth-ui", md), `name "auth-ui" is not the process "auth-api"`},
		{"revision not sha256:<hex>", body("auth-api", `{"application":"auth","process":"auth-api","revision":"sha256:XYZ"}`), "not sha256:<64 hex>"},
		{"revision of another algorithm", body("auth-api", `{"application":"auth","process":"auth-api","revision":"md5:abc"}`), "not sha256"},
		{"namespace that is no name", strings.Replace(body("auth-api", md), "auth-system", "../x", 1), "namespace"},
		{"application that is no id", body("auth-api", `{"application":"Auth/1","process":"auth-api","revision":"`+rev+`"}`), "application"},
		{"process that is no name", body("a.b", `{"application":"auth","process":"a.b","revision":"`+rev+`"}`), "process"},
		{"metadata that is not strings", body("auth-api", `{"application":1}`), "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeQuestionBytes([]byte(c.body))
			if !errors.Is(err, ErrNoQuestion) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("DecodeQuestion = %v, want ErrNoQuestion containing %q", err, c.err)
			}
		})
	}
	long := strings.Repeat("x", 200)
	_, err = DecodeQuestionBytes([]byte(body(long, md)))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("a long name is not clipped: %v", err)
	}
}

func FuzzDecodeQuestion(f *testing.F) {
	f.Add([]byte(`{"name":"auth-api","namespace":"auth-system","phase":"Progressing","checksum":"x","metadata":{"application":"auth","process":"auth-api","revision":"` + rev + `"}}`))
	f.Add([]byte(`{"name":"auth-api","metadata":{}}`))
	f.Add([]byte(`{"metadata":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeQuestionBytes(b)
		if err != nil {
			if !errors.Is(err, ErrNoQuestion) {
				t.Fatalf("an error that is not ErrNoQuestion: %v", err)
			}
			return
		}
		// Whatever is accepted names one member at one revision, fit to be
		// part of object names and label values.
		if q.Tag() == "" || !dnsLabel.MatchString(q.Namespace) || !dnsLabel.MatchString(q.Application) || !dnsLabel.MatchString(q.Process) {
			t.Fatalf("accepted %+v", q)
		}
	})
}

func TestRevisionTag(t *testing.T) {
	if got := RevisionTag(rev); got != tag {
		t.Fatalf("RevisionTag = %q", got)
	}
	if got := RevisionTag("sha256:abc"); got != "" {
		t.Fatalf("RevisionTag of a short revision = %q", got)
	}
}

package releasegate

import (
	"errors"
	"strings"
	"testing"
)

// authInputs is the auth example's releaseGate.json as deploy-kit renders it.
const authInputs = `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080","members":[{"checks":["error-rate","latency"],"process":"auth-api","readiness":{"path":"/api/actuator/health/readiness","port":8081}},{"process":"auth-ui","readiness":{"path":"/","port":8080}}],"migration":{"identity":"auth-migration","nonTransactional":false,"testedAgainst":"sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"}}` + "\n"

func TestDecodeInputsReadsTheRenderedExample(t *testing.T) {
	in, err := DecodeInputs([]byte(authInputs))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Members) != 2 || in.Members[0].Readiness.Port != 8081 || in.Members[1].Process != "auth-ui" ||
		in.Migration == nil || in.Migration.Identity != "auth-migration" || in.Analysis.Iterations != 4 {
		t.Fatalf("decoded %+v", in)
	}
	if m, ok := in.Member("auth-ui"); !ok || m.Readiness.Path != "/" {
		t.Fatalf("Member(auth-ui) = %+v, %v", m, ok)
	}
	if _, ok := in.Member("billing"); ok {
		t.Fatal("found a member that is not one")
	}
}

func TestDecodeInputsRefuses(t *testing.T) {
	member := `{"process":"auth-api","readiness":{"tcp":8080}}`
	doc := func(members, extra string) string {
		return `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"e","members":[` + members + `]` + extra + `}`
	}
	cases := []struct{ name, doc, err string }{
		{"not JSON", `{`, "not JSON"},
		{"two JSON values", doc(member, "") + `{}`, "not JSON"},
		{"an unknown top-level field", doc(member, `,"paths":["/"]`), "schema"},
		{"an unknown member field", doc(`{"process":"a","readiness":{"tcp":1},"weight":1}`, ""), "schema"},
		{"no members", doc("", ""), "schema"},
		{"a member without readiness", doc(`{"process":"a"}`, ""), "schema"},
		{"a readiness that is both http and tcp", doc(`{"process":"a","readiness":{"tcp":1,"path":"/","port":1}}`, ""), "schema"},
		{"an unknown check", doc(`{"process":"a","readiness":{"tcp":1},"checks":["cpu"]}`, ""), "schema"},
		{"a process that is no DNS label", doc(`{"process":"Auth_API","readiness":{"tcp":1}}`, ""), "schema"},
		{"a port out of range", doc(`{"process":"a","readiness":{"tcp":70000}}`, ""), "schema"},
		{"a bad deadline", strings.Replace(doc(member, ""), `"1800s"`, `"30 minutes"`, 1), "schema"},
		{"a migration without identity", doc(member, `,"migration":{"nonTransactional":false}`), "schema"},
		{"a proof that is no revision", doc(member, `,"migration":{"identity":"m","nonTransactional":false,"testedAgainst":"sha1:2f4a"}`), "schema"},
		{"a member named twice", doc(member+","+member, ""), "twice"},
		{"a number where an integer belongs", strings.Replace(doc(member, ""), `"iterations":4`, `"iterations":4.5`, 1), "schema"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeInputs([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("DecodeInputs = %v, want an error containing %q", err, c.err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the cause spans lines: %q", err)
			}
		})
	}
}

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

func FuzzDecodeInputs(f *testing.F) {
	f.Add([]byte(authInputs))
	f.Add([]byte(`{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1s","endpoint":"e","members":[{"process":"a","readiness":{"tcp":1}}]}`))
	f.Add([]byte(`{"members":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := DecodeInputs(b)
		if err != nil {
			return
		}
		if len(in.Members) == 0 || in.Endpoint == "" {
			t.Fatalf("accepted inputs without members or endpoint: %+v", in)
		}
		seen := map[string]bool{}
		for _, m := range in.Members {
			if !dnsLabel.MatchString(m.Process) || seen[m.Process] {
				t.Fatalf("accepted member %q", m.Process)
			}
			seen[m.Process] = true
			if (m.Readiness.TCP == 0) == (m.Readiness.Port == 0) {
				t.Fatalf("accepted readiness %+v", m.Readiness)
			}
		}
	})
}

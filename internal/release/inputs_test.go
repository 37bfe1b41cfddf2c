package release

import (
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

func TestCheckInputs(t *testing.T) {
	good := `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"http://g:8080","members":[{"process":"auth-api","readiness":{"tcp":8080}}]}`
	labelled := map[string]string{LabelPartOf: "auth", LabelManagedBy: ManagedBy}
	cases := []struct {
		name string
		cm   ConfigMap
		err  string
	}{
		{"inputs of this Application", ConfigMap{Labels: labelled, Data: map[string]string{InputsKey: good}}, ""},
		{"inputs labelled for another Application", ConfigMap{Labels: map[string]string{LabelPartOf: "billing", LabelManagedBy: ManagedBy}, Data: map[string]string{InputsKey: good}}, "is not labelled"},
		{"inputs not rendered by deploy-kit", ConfigMap{Labels: map[string]string{LabelPartOf: "auth"}, Data: map[string]string{InputsKey: good}}, "is not labelled"},
		{"inputs without the key", ConfigMap{Labels: labelled}, "has no key"},
		{"inputs that do not parse", ConfigMap{Labels: labelled, Data: map[string]string{InputsKey: "{"}}, "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckInputs("auth", c.cm)
			if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("CheckInputs = %v, want %q", err, c.err)
			}
		})
	}
}

func TestDecodeInputsOwnTrafficFields(t *testing.T) {
	doc := func(extra string) string {
		return `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"e","members":[{"process":"auth-api","readiness":{"tcp":8080}}]` + extra + `}`
	}
	in, err := DecodeInputs([]byte(doc(`,"errorRate":0.05,"latency":"500ms","protectedPath":"/admin/","protectedBy":"auth-api"`)))
	if err != nil {
		t.Fatal(err)
	}
	if in.ErrorRate == nil || *in.ErrorRate != 0.05 || in.Latency != "500ms" || in.ProtectedPath != "/admin/" || in.ProtectedBy != "auth-api" {
		t.Fatalf("decoded %+v", in)
	}
	for _, ok := range []string{`,"errorRate":0`, `,"errorRate":1`, `,"latency":"2s"`, `,"protectedPath":"/","protectedBy":"auth-api"`, `,"protectedPath":"/a%20b/c","protectedBy":"auth-api"`} {
		if _, err := DecodeInputs([]byte(doc(ok))); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	refused := map[string]string{
		"an error rate over 1":           `,"errorRate":1.5`,
		"a negative error rate":          `,"errorRate":-0.1`,
		"an error rate that is text":     `,"errorRate":"5%"`,
		"a zero latency":                 `,"latency":"0s"`,
		"a latency that is no duration":  `,"latency":"fast"`,
		"a path and no member":           `,"protectedPath":"/admin"`,
		"a member and no path":           `,"protectedBy":"auth-api"`,
		"a protected path with //":       `,"protectedPath":"//evil.example/","protectedBy":"auth-api"`,
		"a protected path with ..":       `,"protectedPath":"/a/../b","protectedBy":"auth-api"`,
		"a protected path with a query":  `,"protectedPath":"/a?b","protectedBy":"auth-api"`,
		"a protected path with a scheme": `,"protectedPath":"http://x/","protectedBy":"auth-api"`,
		"a protectedBy that is no name":  `,"protectedPath":"/a","protectedBy":"Auth API"`,
	}
	for name, extra := range refused {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeInputs([]byte(doc(extra))); err == nil || !strings.Contains(err.Error(), "schema") {
				t.Fatalf("DecodeInputs = %v, want a schema error", err)
			}
		})
	}
}

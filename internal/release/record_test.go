package release

import (
	"strings"
	"testing"
)

func TestRecordCodec(t *testing.T) {
	since := t0
	r := Record{Namespace: "auth-system", Application: "auth", Serving: prevRev, Primaries: map[string]string{"auth-api": "d"},
		Pinned: rev, Since: &since, Warmup: &WarmupRecord{Revision: prevRev, Failed: &WarmupFailure{Request: "a.example.com/", Status: 503}}}
	data := EncodeRecord(r)
	got, err := DecodeRecord("auth-system", "auth", data)
	if err != nil || !SameRecord(got, r) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if RecordConfigMap("auth-system", "auth") != "auth-system.auth-release-record" {
		t.Fatal(RecordConfigMap("auth-system", "auth"))
	}
	cases := []struct {
		name, ns, raw, cause string
	}{
		{"another namespace's record", "billing-system", data[RecordKey], `names namespace "auth-system"`},
		{"not JSON", "auth-system", `{`, "does not decode"},
		{"an unknown field", "auth-system", `{"namespace":"auth-system","application":"auth","x":1}`, "does not decode"},
		{"two values", "auth-system", `{"namespace":"auth-system","application":"auth"} {}`, "more than one"},
		{"another Application", "auth-system", `{"namespace":"auth-system","application":"billing"}`, "names Application"},
		{"a serving that is not a revision", "auth-system", `{"namespace":"auth-system","application":"auth","serving":"v1"}`, "not a revision"},
		{"a pinned revision without its time", "auth-system", `{"namespace":"auth-system","application":"auth","pinned":"` + rev + `"}`, "come together"},
		{"a warmup of no revision", "auth-system", `{"namespace":"auth-system","application":"auth","warmup":{"revision":"x","warmed":true}}`, "warmup revision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := DecodeRecord(c.ns, "auth", map[string]string{RecordKey: c.raw}); err == nil || !strings.Contains(err.Error(), c.cause) {
				t.Fatalf("err %v, want %q", err, c.cause)
			}
		})
	}
	if _, err := DecodeRecord("auth-system", "auth", map[string]string{}); err == nil {
		t.Fatal("a record without its key reads")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	since := t0
	f.Add(EncodeRecord(Record{Namespace: "auth-system", Application: "auth", Serving: prevRev, Pinned: rev, Since: &since})[RecordKey])
	f.Add(`{"namespace":"auth-system","application":"auth"}`)
	f.Add(`{"namespace":"auth-system","application":"auth","warmup":{"revision":"` + rev + `","warmed":false,"failed":{"request":"a/","status":503}}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := DecodeRecord("auth-system", "auth", map[string]string{RecordKey: raw})
		if err != nil {
			return
		}
		// What reads, re-encoded, reads the same.
		again, err := DecodeRecord("auth-system", "auth", EncodeRecord(r))
		if err != nil || !SameRecord(r, again) {
			t.Fatalf("re-encoded record does not read the same: %v", err)
		}
	})
}

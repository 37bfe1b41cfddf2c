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
		{"a hold of nothing pinned", "auth-system", `{"namespace":"auth-system","application":"auth","held":{"reason":"analysis-failed","cause":"c","since":"2026-11-30T10:00:00Z"}}`, "without a pinned revision"},
		{"a hold whose reason is no word", "auth-system", pinnedWith(`"held":{"reason":"Analysis Failed","cause":"c","since":"2026-11-30T10:00:00Z"}`), "is not a reason"},
		{"a hold with no reason", "auth-system", pinnedWith(`"held":{"reason":"","cause":"c","since":"2026-11-30T10:00:00Z"}`), "is not a reason"},
		{"a hold without its time", "auth-system", pinnedWith(`"held":{"reason":"stale-proof","cause":"c"}`), "without its time"},
		{"a hold with an unknown field", "auth-system", pinnedWith(`"held":{"reason":"stale-proof","cause":"c","since":"2026-11-30T10:00:00Z","x":1}`), "does not decode"},
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

// pinnedWith is a record pinning rev with one more field.
func pinnedWith(field string) string {
	return `{"namespace":"auth-system","application":"auth","pinned":"` + rev + `","since":"2026-11-30T10:00:00Z",` + field + `}`
}

func TestRecordHold(t *testing.T) {
	since := t0
	held := Record{Namespace: "auth-system", Application: "auth", Serving: prevRev, Pinned: rev, Since: &since,
		Held: &HeldRecord{Reason: "migration-failed", Cause: "Job auth-migration-" + tag + " failed", Since: t0}}
	got, err := DecodeRecord("auth-system", "auth", EncodeRecord(held))
	if err != nil || !SameRecord(got, held) || got.Held == nil || *got.Held != *held.Held {
		t.Fatalf("a hold does not round trip: %+v %v", got.Held, err)
	}
	// A record an older gate wrote has no hold, and reads as before.
	old, err := DecodeRecord("auth-system", "auth", map[string]string{RecordKey: pinnedWith(`"serving":"` + prevRev + `"`)})
	if err != nil || old.Held != nil {
		t.Fatalf("a record without a hold: %+v %v", old, err)
	}
	notHeld := held
	notHeld.Held = nil
	otherCause := held
	otherCause.Held = &HeldRecord{Reason: "migration-failed", Cause: "another", Since: t0}
	otherReason := held
	otherReason.Held = &HeldRecord{Reason: "analysis-failed", Cause: held.Held.Cause, Since: t0}
	sameHold := held
	sameHold.Held = &HeldRecord{Reason: "migration-failed", Cause: held.Held.Cause, Since: t0}
	for _, c := range []struct {
		name string
		b    Record
		same bool
	}{
		{"the same hold", sameHold, true},
		{"the hold cleared", notHeld, false},
		{"another cause", otherCause, false},
		{"another reason", otherReason, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if SameRecord(held, c.b) != c.same {
				t.Fatalf("SameRecord = %v, want %v", !c.same, c.same)
			}
		})
	}
	if !strings.Contains(EncodeRecord(notHeld)[RecordKey], `"pinned"`) || strings.Contains(EncodeRecord(notHeld)[RecordKey], `"held"`) {
		t.Fatalf("a record not held writes a hold: %s", EncodeRecord(notHeld)[RecordKey])
	}
}

func FuzzDecodeRecord(f *testing.F) {
	since := t0
	f.Add(EncodeRecord(Record{Namespace: "auth-system", Application: "auth", Serving: prevRev, Pinned: rev, Since: &since})[RecordKey])
	f.Add(`{"namespace":"auth-system","application":"auth"}`)
	f.Add(`{"namespace":"auth-system","application":"auth","warmup":{"revision":"` + rev + `","warmed":false,"failed":{"request":"a/","status":503}}}`)
	f.Add(EncodeRecord(Record{Namespace: "auth-system", Application: "auth", Serving: prevRev, Pinned: rev, Since: &since,
		Held: &HeldRecord{Reason: "stale-proof", Cause: "proven against " + tag + ", but nothing serves", Since: t0}})[RecordKey])
	f.Add(pinnedWith(`"held":{"reason":"analysis-failed","cause":"Flagger failed auth-api","since":"2026-11-30T10:00:00.5+02:00"}`))
	f.Add(pinnedWith(`"held":{"reason":"migration-failed","cause":"","since":null}`))
	f.Add(`{"namespace":"auth-system","application":"auth","held":{"reason":"analysis-failed","cause":"","since":"2026-11-30T10:00:00Z"}}`)
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

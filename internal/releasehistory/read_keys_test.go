package releasehistory_test

import (
	"encoding/json"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// TestViewNamesEveryRecordKey: the read API answers every key a record
// holds, so a key the record gains is not lost on the way to its readers.
func TestViewNamesEveryRecordKey(t *testing.T) {
	r := rec(t, "2", rr.StateAborted, ago(time.Hour), ago(time.Hour))
	r.Held, r.Objects = "analysis-failed", "Canary/docs/api"
	raw, err := json.Marshal(rh.ViewOf(r))
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatal(err)
	}
	for _, k := range rr.Keys {
		if _, ok := view[k]; !ok {
			t.Errorf("the read API's release has no %s", k)
		}
	}
	if view["held"] != "analysis-failed" || view["objects"] != "Canary/docs/api" {
		t.Errorf("held %v, objects %v", view["held"], view["objects"])
	}
}

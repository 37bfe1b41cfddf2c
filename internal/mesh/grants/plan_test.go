package grants

import (
	"slices"
	"testing"
)

func TestWanted(t *testing.T) {
	users, err := Wanted([]string{"n1", "web.api"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range users {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"agent-n1", "agent-web_2eapi", "assigner", "backup-seat-n1", "backup-seat-web_2eapi", "source", "view", "watchman"}
	if !slices.Equal(names, want) {
		t.Errorf("users %v, want %v", names, want)
	}
	if _, err := Wanted([]string{"n 1"}); err == nil {
		t.Error("a node name with a space was taken")
	}
}

func TestPlan(t *testing.T) {
	a := Permissions{Pub: []string{"a", "b"}, Sub: []string{"i.>"}}
	reordered := Permissions{Pub: []string{"b", "a"}, Sub: []string{"i.>"}}
	wider := Permissions{Pub: []string{"a", "b", "c"}, Sub: []string{"i.>"}}
	responds := Permissions{Pub: []string{"a", "b"}, Sub: []string{"i.>"}, Respond: true}
	for _, tc := range []struct {
		name       string
		have, want map[string]Permissions
		plan       []Change
	}{
		{"nothing to do", map[string]Permissions{"u": a}, map[string]Permissions{"u": a}, nil},
		{"the order of subjects is no change", map[string]Permissions{"u": a}, map[string]Permissions{"u": reordered}, nil},
		{"a new node's users are added", map[string]Permissions{"assigner": a},
			map[string]Permissions{"assigner": a, "agent-n2": a, "backup-seat-n2": a},
			[]Change{{"agent-n2", Add}, {"backup-seat-n2", Add}}},
		{"a node no longer registered is revoked", map[string]Permissions{"agent-n1": a, "agent-n2": a}, map[string]Permissions{"agent-n1": a},
			[]Change{{"agent-n2", Revoke}}},
		{"a wider permission is a change", map[string]Permissions{"u": a}, map[string]Permissions{"u": wider}, []Change{{"u", Amend}}},
		{"answering is a change", map[string]Permissions{"u": a}, map[string]Permissions{"u": responds}, []Change{{"u", Amend}}},
		{"from nothing", nil, map[string]Permissions{"b": a, "a": a}, []Change{{"a", Add}, {"b", Add}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Plan(tc.have, tc.want); !slices.Equal(got, tc.plan) {
				t.Errorf("plan %v, want %v", got, tc.plan)
			}
		})
	}
}

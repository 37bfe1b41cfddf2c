package ociimage

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
)

func TestSelect(t *testing.T) {
	for _, c := range []struct {
		list string
		want []string
		err  string
	}{
		{"", Names(), ""},
		{" , ", Names(), ""},
		{"collector", []string{"collector"}, ""},
		{"reporter,collector", []string{"collector", "reporter"}, ""},
		{"backup-rabbitmq backup-files", []string{"backup-files", "backup-rabbitmq"}, ""},
		{"collector,collector", []string{"collector"}, ""},
		{"backup", nil, `no image is named "backup" (there are release-gate, `},
		{"collector,nope", nil, `"nope"`},
	} {
		got, err := Select(c.list)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Select(%q): error %v, want %q", c.list, err, c.err)
			}
			continue
		}
		var names []string
		for _, target := range got {
			names = append(names, target.Name)
		}
		if err != nil || !slices.Equal(names, c.want) {
			t.Errorf("Select(%q) = %v, %v; want %v", c.list, names, err, c.want)
		}
	}
}

func TestEntrypointAndPackage(t *testing.T) {
	for _, c := range []struct {
		name       string
		entrypoint []string
		pkg        string
	}{
		{"release-gate", []string{"/usr/local/bin/release-gate"}, "./cmd/release-gate"},
		{"backup-files", []string{"/usr/local/bin/backup", "files"}, "./cmd/backup"},
		{"backup-postgres", []string{"/usr/local/bin/backup", "postgres"}, "./cmd/backup"},
	} {
		got, err := Select(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0].Entrypoint(), c.entrypoint) || got[0].Package() != c.pkg {
			t.Errorf("%s: entrypoint %q package %q", c.name, got[0].Entrypoint(), got[0].Package())
		}
	}
	// Targets hands out copies: changing one changes no later call's.
	files := func(ts []Target) int {
		return slices.IndexFunc(ts, func(t Target) bool { return t.Name == "backup-files" })
	}
	first := Targets()
	first[files(first)].Args[0] = "changed"
	if again := Targets(); again[files(again)].Args[0] == "changed" {
		t.Error("Targets shares its Args with the caller")
	}
}

// TestEveryCommandHasAnImage holds the targets to the module: every command
// but the demo (a story told on a laptop, not a service) has an image, and
// backup has one per method, each started with that method's command.
func TestEveryCommandHasAnImage(t *testing.T) {
	dirs, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string]bool{}
	for _, target := range Targets() {
		commands[target.Command] = true
	}
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "demo" && !commands[d.Name()] {
			t.Errorf("cmd/%s has no image: add its Target in internal/ociimage/target.go and its stage in deploy/Dockerfile", d.Name())
		}
	}
	var methods, args []string
	for _, m := range backup.Methods() {
		methods = append(methods, m.Name())
	}
	for _, target := range Targets() {
		if target.Command == "backup" {
			if len(target.Args) != 1 || target.Name != "backup-"+target.Args[0] {
				t.Errorf("%s starts backup with %q", target.Name, target.Args)
			}
			args = append(args, target.Args...)
		} else if len(target.Args) != 0 || target.Name != target.Command {
			t.Errorf("%s: command %s args %q", target.Name, target.Command, target.Args)
		}
	}
	if slices.Sort(methods); !slices.Equal(methods, slices.Sorted(slices.Values(args))) {
		t.Errorf("backup's methods are %v, its images start %v", methods, args)
	}
}

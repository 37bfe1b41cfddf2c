package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// stages records what a restore told its Progress.
type stages struct {
	t     *testing.T
	said  []string
	open  string
	moved int64
}

func (s *stages) Begin(stage string, size int64) {
	if s.open != "" {
		s.t.Errorf("%q began while %q was under way", stage, s.open)
	}
	s.open, s.moved = stage, 0
	s.said = append(s.said, fmt.Sprintf("%s (%d bytes)", stage, size))
}

func (s *stages) Advance(n int64) {
	if s.open == "" {
		s.t.Errorf("%d bytes advanced outside a stage", n)
	}
	s.moved += n
}

func (s *stages) End() {
	if s.open == "" {
		s.t.Error("a stage ended that never began")
	}
	s.said = append(s.said, fmt.Sprintf("end after %d bytes", s.moved))
	s.open = ""
}

func TestRestoreTellsItsProgressAndWhatItChecked(t *testing.T) {
	claim := t.TempDir()
	source := t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha"), "b.txt": []byte("beta")})
	g := Generation{Method: "files", Time: time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)}
	path, err := writeGeneration(t, claim, g, rawArchive{dir: source})
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	heard := &stages{t: t}
	restored, err := Restorer{Source: ClaimSource{Dir: claim}, Progress: heard}.Restore(context.Background(), g, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("reading and unpacking %s (%d bytes)", g.Name(), info.Size()),
		fmt.Sprintf("end after %d bytes", info.Size()),
	}
	if !slices.Equal(heard.said, want) {
		t.Errorf("the progress heard %q, want %q", heard.said, want)
	}
	if restored.Size != info.Size() || restored.Files != 2 {
		t.Errorf("restored %+v", restored)
	}
	if want := []string{"gzip's CRC", "the archive reads whole"}; !slices.Equal(restored.Checks, want) {
		t.Errorf("checks %q, want %q", restored.Checks, want)
	}

	// A dump is written, not unpacked; a broken generation ends its stage too.
	dumpClaim, dump := dumpOnClaim(t)
	heard = &stages{t: t}
	if _, err := (Restorer{Source: ClaimSource{Dir: dumpClaim}, Progress: heard}).Restore(context.Background(), dump, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(heard.said) != 2 || heard.said[0][:len("reading and writing")] != "reading and writing" {
		t.Errorf("the progress heard %q", heard.said)
	}
	if err := os.WriteFile(filepath.Join(dumpClaim, dump.Name()), []byte("not gzip"), 0o600); err != nil {
		t.Fatal(err)
	}
	heard = &stages{t: t}
	if _, err := (Restorer{Source: ClaimSource{Dir: dumpClaim}, Progress: heard}).Restore(context.Background(), dump, t.TempDir()); err == nil {
		t.Fatal("restored a broken generation")
	}
	if len(heard.said) != 2 || heard.open != "" {
		t.Errorf("a failed restore left its stage open: %q", heard.said)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 parts", 1: "1 part", 3: "3 parts"} {
		if got := count(n, "part"); got != want {
			t.Errorf("count(%d) = %q", n, got)
		}
	}
}

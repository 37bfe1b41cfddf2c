package releasegate

import (
	"testing"

	"k8s.io/client-go/rest"
)

// An address client-go cannot build a client for stops the gate at start,
// before it serves anything.
func TestNewKubeRefusesAnAddressThatDoesNotParse(t *testing.T) {
	if _, err := NewKube(&rest.Config{Host: "http://a b"}); err == nil {
		t.Fatal("a client was built for an address that does not parse")
	}
}

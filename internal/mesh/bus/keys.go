package bus

import (
	"fmt"
	"strings"
)

// The buckets of the bus. Each node's compositions are in a bucket of their
// own, ComposedBucket(node), and those over InlineLimit in an object store
// of the same name, so a node's credential can be granted its own and
// nothing else.
const (
	ModulesBucket = "mesh_modules"
	BuildsBucket  = "mesh_builds"
	HoldsBucket   = "mesh_holds"
	GrantsBucket  = "mesh_grants"
	WantsBucket   = "mesh_wants"
	HavesBucket   = "mesh_haves"
	// SealsBucket holds the operator's seal on each want a put or a hand
	// owns. No part's credential may write it, so a seal is what proves
	// such an owner: the want's own owner is what its writer says, and the
	// assigner writes wants.
	SealsBucket = "mesh_seals"
)

// ComposedPrefix starts the name of a node's composition bucket.
const ComposedPrefix = "composed-"

// InlineLimit is the largest envelope a composition key holds itself; a
// larger one goes to its node's object store and the key points at it.
const InlineLimit = 64 << 10

// Kind is what a key names: its first token.
type Kind string

// The kinds of key, one per bucket.
const (
	KindModule      Kind = "module"      // module.<module> in mesh_modules
	KindBuild       Kind = "build"       // build.<module>.<fingerprint> in mesh_builds
	KindHold        Kind = "hold"        // hold.<module>.<fingerprint> in mesh_holds
	KindGrant       Kind = "grant"       // grant.<module>.<fingerprint> in mesh_grants
	KindComposition Kind = "composition" // composition.<module>.<fingerprint> in composed-<node>
	KindWant        Kind = "want"        // want.<node>.<module> in mesh_wants
	KindHave        Kind = "have"        // have.<node>.<module> in mesh_haves
	KindSeal        Kind = "seal"        // seal.<node>.<module> in mesh_seals
)

// Key is a key of the bus read back into its names; a field the kind does
// not carry is empty.
type Key struct {
	Kind        Kind
	Module      string
	Node        string
	Fingerprint string
}

// String is the key as the bucket holds it; it panics on a name that cannot
// be encoded, so callers build keys with the constructors below.
func (k Key) String() string {
	s, err := k.Encode()
	if err != nil {
		panic(err)
	}
	return s
}

// Encode is the key as the bucket holds it.
func (k Key) Encode() (string, error) {
	var names []string
	switch k.Kind {
	case KindModule:
		names = []string{k.Module}
	case KindBuild, KindHold, KindGrant, KindComposition:
		names = []string{k.Module, k.Fingerprint}
	case KindWant, KindHave, KindSeal:
		names = []string{k.Node, k.Module}
	default:
		return "", fmt.Errorf("%w: no kind of key %q", ErrName, k.Kind)
	}
	tokens := []string{string(k.Kind)}
	for _, n := range names {
		t, err := EncodeName(n)
		if err != nil {
			return "", err
		}
		tokens = append(tokens, t)
	}
	return strings.Join(tokens, "."), nil
}

// ModuleKey is module.<module>.
func ModuleKey(module string) (string, error) {
	return Key{Kind: KindModule, Module: module}.Encode()
}

// BuildKey is build.<module>.<fingerprint>.
func BuildKey(module, fingerprint string) (string, error) {
	return Key{Kind: KindBuild, Module: module, Fingerprint: fingerprint}.Encode()
}

// HoldKey is hold.<module>.<fingerprint>.
func HoldKey(module, fingerprint string) (string, error) {
	return Key{Kind: KindHold, Module: module, Fingerprint: fingerprint}.Encode()
}

// GrantKey is grant.<module>.<fingerprint>.
func GrantKey(module, fingerprint string) (string, error) {
	return Key{Kind: KindGrant, Module: module, Fingerprint: fingerprint}.Encode()
}

// CompositionKey is composition.<module>.<fingerprint>, in the node's bucket.
func CompositionKey(module, fingerprint string) (string, error) {
	return Key{Kind: KindComposition, Module: module, Fingerprint: fingerprint}.Encode()
}

// WantKey is want.<node>.<module>.
func WantKey(node, module string) (string, error) {
	return Key{Kind: KindWant, Node: node, Module: module}.Encode()
}

// SealKey is seal.<node>.<module>.
func SealKey(node, module string) (string, error) {
	return Key{Kind: KindSeal, Node: node, Module: module}.Encode()
}

// NodeKeys is the pattern of node's wants, haves or seals, <kind>.<node>.>:
// what a node's own credential may read of the bucket.
func NodeKeys(kind Kind, node string) (string, error) {
	if kind != KindWant && kind != KindHave && kind != KindSeal {
		return "", fmt.Errorf("a %s is not keyed by node", kind)
	}
	t, err := EncodeName(node)
	if err != nil {
		return "", err
	}
	return string(kind) + "." + t + ".>", nil
}

// HaveKey is have.<node>.<module>.
func HaveKey(node, module string) (string, error) {
	return Key{Kind: KindHave, Node: node, Module: module}.Encode()
}

// ComposedBucket is the name of node's composition bucket.
func ComposedBucket(node string) (string, error) {
	t, err := EncodeName(node)
	if err != nil {
		return "", err
	}
	return ComposedPrefix + t, nil
}

// NodeOfBucket is the node a composition bucket belongs to.
func NodeOfBucket(bucket string) (string, error) {
	t, ok := strings.CutPrefix(bucket, ComposedPrefix)
	if !ok {
		return "", fmt.Errorf("%w: %q is not a composition bucket", ErrName, bucket)
	}
	return DecodeName(t)
}

// ParseKey reads a key of the bus back into its kind and names; a key no
// constructor above could have written is refused.
func ParseKey(key string) (Key, error) {
	tokens := strings.Split(key, ".")
	k := Key{Kind: Kind(tokens[0])}
	var into []*string
	switch k.Kind {
	case KindModule:
		into = []*string{&k.Module}
	case KindBuild, KindHold, KindGrant, KindComposition:
		into = []*string{&k.Module, &k.Fingerprint}
	case KindWant, KindHave, KindSeal:
		into = []*string{&k.Node, &k.Module}
	default:
		return Key{}, fmt.Errorf("%w: %q is no key of the bus", ErrName, key)
	}
	if len(tokens) != len(into)+1 {
		return Key{}, fmt.Errorf("%w: %q has %d names, %s keys have %d", ErrName, key, len(tokens)-1, k.Kind, len(into))
	}
	for i, dst := range into {
		name, err := DecodeName(tokens[i+1])
		if err != nil {
			return Key{}, fmt.Errorf("key %q: %w", key, err)
		}
		*dst = name
	}
	return k, nil
}

package bus

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds a module, node or fingerprint name: its key-safe form
// is at most three times as long, and a key or bucket name must stay well
// inside what the server takes.
const MaxNameBytes = 64

// ErrName marks a name that cannot be encoded into a key.
var ErrName = errors.New("not a name the bus can key")

// EncodeName is the key-safe form of a module, node or fingerprint name.
// Letters, digits and '-' stand for themselves; every other byte is written
// as '_' and two lower-case hex digits. The form never holds a dot, so the
// tokens of a key split where its dots are, and it is also a valid bucket
// name (letters, digits, '-' and '_'), which composed-<node> needs. A name
// that is empty, longer than MaxNameBytes, not UTF-8, or holds a space or a
// control character is refused: such a name is a mistake upstream, and a key
// made of it would be unreadable in every tool that lists the bucket.
func EncodeName(name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("%w: the name is empty", ErrName)
	case len(name) > MaxNameBytes:
		return "", fmt.Errorf("%w: %q is %d bytes, more than %d", ErrName, name, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return "", fmt.Errorf("%w: %q is not UTF-8", ErrName, name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "", fmt.Errorf("%w: %q holds a space or a control character", ErrName, name)
		}
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isPlain(c) {
			b.WriteByte(c)
			continue
		}
		const digits = "0123456789abcdef"
		b.Write([]byte{'_', digits[c>>4], digits[c&0xf]})
	}
	return b.String(), nil
}

// DecodeName reads a name back from its key-safe form; a token EncodeName
// cannot have written is refused.
func DecodeName(token string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case isPlain(c):
			b.WriteByte(c)
		case c == '_' && i+2 < len(token) && isLowerHex(token[i+1]) && isLowerHex(token[i+2]):
			b.WriteByte(unhex(token[i+1])<<4 | unhex(token[i+2]))
			i += 2
		default:
			return "", fmt.Errorf("%w: %q is not a key-safe name", ErrName, token)
		}
	}
	name := b.String()
	// Only the one form EncodeName gives is accepted, so a name has exactly
	// one key (an escaped letter would be a second key for the same module).
	if again, err := EncodeName(name); err != nil || again != token {
		return "", fmt.Errorf("%w: %q is not a key-safe name", ErrName, token)
	}
	return name, nil
}

func isPlain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

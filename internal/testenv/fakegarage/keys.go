package fakegarage

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

type key struct {
	id, name, secret string
	created          time.Time
	// expiration is when the key stops signing in; nil for never.
	expiration *time.Time
}

// expiry is the key's expired and expiration fields as Garage answers them.
func (k *key) expiry() (expired bool, expiration any) {
	if k.expiration == nil {
		return false, nil
	}
	return !time.Now().Before(*k.expiration), k.expiration.Format(time.RFC3339)
}

// HoldKey creates a key named name as Garage's own CreateKey would, and
// returns its access key id and secret.
func (g *Garage) HoldKey(name string) (id, secret string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.newKey(name)
	return k.id, k.secret
}

// HoldImportedKey puts a key with this id and secret into Garage.
func (g *Garage) HoldImportedKey(id, secret, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys[id] = &key{id: id, name: name, secret: secret, created: time.Now().UTC()}
}

// ExpireKey sets the key's expiration to a moment past, as UpdateKey with
// an expiration would: Garage then reports it expired.
func (g *Garage) ExpireKey(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	past := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	g.keys[id].expiration = &past
}

// Key reports the key with this id: its name and secret.
func (g *Garage) Key(id string) (name, secret string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k, ok := g.keys[id]
	if !ok {
		return "", "", false
	}
	return k.name, k.secret, true
}

// KeysNamed lists the ids of the keys named name, sorted.
func (g *Garage) KeysNamed(name string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for _, k := range g.keys {
		if k.name == name {
			ids = append(ids, k.id)
		}
	}
	sort.Strings(ids)
	return ids
}

// KeyCount is how many keys Garage holds.
func (g *Garage) KeyCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.keys)
}

func (g *Garage) newKey(name string) *key {
	k := &key{id: "GK" + randomHex(12), secret: randomHex(32), name: name, created: time.Now().UTC()}
	g.keys[k.id] = k
	return k
}

func (g *Garage) listKeys() answer {
	items := make([]map[string]any, 0, len(g.keys))
	for _, k := range g.sortedKeys() {
		expired, expiration := k.expiry()
		items = append(items, map[string]any{
			"id": k.id, "name": k.name, "expired": expired,
			"created": k.created.Format(time.RFC3339), "expiration": expiration,
		})
	}
	return answer{http.StatusOK, items}
}

func (g *Garage) sortedKeys() []*key {
	keys := make([]*key, 0, len(g.keys))
	for _, k := range g.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].id < keys[j].id })
	return keys
}

func (g *Garage) getKeyInfo(id, search *string, showSecret bool) answer {
	var k *key
	switch {
	case id != nil && search == nil:
		k = g.keys[*id]
		if k == nil {
			return fail(http.StatusNotFound, "NoSuchAccessKey", "Access key not found: %s", *id)
		}
	case id == nil && search != nil:
		// Garage matches a key by the start of its ID or by its whole name,
		// either without regard to case, and looks at the first ten matches.
		pattern := strings.ToLower(*search)
		var found []*key
		for _, c := range g.sortedKeys() {
			if strings.HasPrefix(strings.ToLower(c.id), pattern) || strings.ToLower(c.name) == pattern {
				found = append(found, c)
			}
		}
		switch {
		case len(found) == 0:
			return fail(http.StatusNotFound, "NoSuchAccessKey", "Access key not found: %s", *search)
		case len(found) > 1:
			return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: %d matching keys", min(len(found), 10))
		}
		k = found[0]
	default:
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Either id or search must be provided (but not both)")
	}
	return answer{http.StatusOK, g.keyInfo(k, showSecret)}
}

func (g *Garage) keyInfo(k *key, showSecret bool) map[string]any {
	buckets := []map[string]any{}
	for _, b := range g.sortedBuckets() {
		// Garage lists every bucket the key has an entry on, whatever its
		// flags say.
		p, ok := b.perms[k.id]
		if !ok {
			continue
		}
		buckets = append(buckets, map[string]any{
			"id": b.id, "globalAliases": slices.Clone(b.aliases), "localAliases": []string{},
			"permissions": map[string]bool{"read": p.Read, "write": p.Write, "owner": p.Owner},
		})
	}
	expired, expiration := k.expiry()
	info := map[string]any{
		"accessKeyId": k.id, "name": k.name, "expired": expired,
		"created": k.created.Format(time.RFC3339), "expiration": expiration,
		"permissions": map[string]bool{"createBucket": false},
		"buckets":     buckets,
	}
	if showSecret {
		info["secretAccessKey"] = k.secret
	}
	return info
}

func (g *Garage) importKey(id, secret string, name *string) answer {
	if _, ok := g.keys[id]; ok {
		return fail(http.StatusConflict, "KeyAlreadyExists", "Key %s already exists in data store. Even if it is deleted, we can't let you create a new key with the same ID. Sorry.", id)
	}
	if !keyIDFormat.MatchString(id) || !secretFormat.MatchString(secret) {
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Invalid key format")
	}
	n := "Imported key"
	if name != nil {
		n = *name
	}
	k := &key{id: id, secret: secret, name: n, created: time.Now().UTC()}
	g.keys[id] = k
	return answer{http.StatusOK, g.keyInfo(k, false)}
}

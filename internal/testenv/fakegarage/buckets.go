package fakegarage

import (
	"encoding/hex"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// Perm is a key's permissions on a bucket.
type Perm struct {
	Read, Write, Owner bool
}

type bucket struct {
	id      string
	created time.Time
	aliases []string
	perms   map[string]Perm
}

// Bucket reports the bucket with this global alias: its id and each key's
// permissions on it.
func (g *Garage) Bucket(alias string) (id string, perms map[string]Perm, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.byAlias(alias)
	if b == nil {
		return "", nil, false
	}
	perms = make(map[string]Perm, len(b.perms))
	for k, p := range b.perms {
		perms[k] = p
	}
	return b.id, perms, true
}

// BucketCount is how many buckets Garage holds.
func (g *Garage) BucketCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.buckets)
}

// HoldBucket creates a bucket with this global alias, as CreateBucket would.
func (g *Garage) HoldBucket(alias string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newBucket(alias).id
}

// Grant sets a key's permissions on the bucket with this alias.
func (g *Garage) Grant(alias, keyID string, p Perm) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byAlias(alias).perms[keyID] = p
}

func (g *Garage) byAlias(alias string) *bucket {
	if id, ok := g.aliases[alias]; ok {
		return g.buckets[id]
	}
	return nil
}

func (g *Garage) newBucket(alias string) *bucket {
	b := &bucket{id: randomHex(32), created: time.Now().UTC(), perms: map[string]Perm{}}
	if alias != "" {
		b.aliases = []string{alias}
		g.aliases[alias] = b.id
	}
	g.buckets[b.id] = b
	return b
}

func (g *Garage) sortedBuckets() []*bucket {
	bs := make([]*bucket, 0, len(g.buckets))
	for _, b := range g.buckets {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].id < bs[j].id })
	return bs
}

func (g *Garage) listBuckets() answer {
	items := make([]map[string]any, 0, len(g.buckets))
	for _, b := range g.sortedBuckets() {
		items = append(items, map[string]any{
			"id": b.id, "created": b.created.Format(time.RFC3339),
			"globalAliases": slices.Clone(b.aliases), "localAliases": []any{},
		})
	}
	return answer{http.StatusOK, items}
}

func (g *Garage) getBucketInfo(id, alias, search *string) answer {
	var b *bucket
	var asked string
	switch {
	case id != nil && alias == nil && search == nil:
		if !bucketIDForm.MatchString(*id) {
			return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Invalid bucket id")
		}
		asked, b = *id, g.buckets[strings.ToLower(*id)]
	case id == nil && alias != nil && search == nil:
		asked, b = *alias, g.byAlias(*alias)
	case id == nil && alias == nil && search != nil:
		asked = *search
		if b = g.byAlias(*search); b == nil {
			found, err := g.bucketsByIDPrefix(*search)
			if err != nil {
				return *err
			}
			if len(found) > 1 {
				return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Several matching buckets: %s", *search)
			}
			if len(found) == 1 {
				b = found[0]
			}
		}
	default:
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Either id, globalAlias or search must be provided (but not several of them)")
	}
	if b == nil {
		return fail(http.StatusNotFound, "NoSuchBucket", "Bucket not found: %s", asked)
	}
	return answer{http.StatusOK, g.bucketInfo(b)}
}

// bucketsByIDPrefix is Garage's search of bucket IDs (v2.0.0): the
// pattern's whole hexadecimal bytes (an odd last digit aside, either case)
// say where to start, Garage looks at the first ten buckets from there, and
// keeps those whose lowercase ID begins with the pattern as given. A pattern
// shorter than a byte, or not hexadecimal, names no bucket.
func (g *Garage) bucketsByIDPrefix(pattern string) ([]*bucket, *answer) {
	start, err := hex.DecodeString(pattern[:len(pattern)&^1])
	if err != nil || len(pattern) < 2 {
		a := fail(http.StatusNotFound, "NoSuchBucket", "Bucket not found: %s", pattern)
		return nil, &a
	}
	if len(start) > 32 {
		a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: invalid length")
		return nil, &a
	}
	from := hex.EncodeToString(start)
	var found []*bucket
	looked := 0
	for _, c := range g.sortedBuckets() {
		if c.id < from {
			continue
		}
		if looked++; looked > 10 {
			break
		}
		if strings.HasPrefix(c.id, pattern) {
			found = append(found, c)
		}
	}
	return found, nil
}

func (g *Garage) bucketInfo(b *bucket) map[string]any {
	keys := []map[string]any{}
	ids := make([]string, 0, len(b.perms))
	for id := range b.perms {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		k := g.keys[id]
		if k == nil {
			continue
		}
		p := b.perms[id]
		keys = append(keys, map[string]any{
			"accessKeyId": id, "name": k.name, "bucketLocalAliases": []string{},
			"permissions": map[string]bool{"read": p.Read, "write": p.Write, "owner": p.Owner},
		})
	}
	return map[string]any{
		"id": b.id, "created": b.created.Format(time.RFC3339), "globalAliases": slices.Clone(b.aliases),
		"websiteAccess": false, "websiteConfig": nil, "keys": keys,
		"objects": 0, "bytes": 0, "unfinishedUploads": 0, "unfinishedMultipartUploads": 0,
		"unfinishedMultipartUploadParts": 0, "unfinishedMultipartUploadBytes": 0,
		"quotas": map[string]any{"maxSize": nil, "maxObjects": nil},
	}
}

func (g *Garage) createBucket(alias *string) answer {
	a := ""
	if alias != nil {
		a = *alias
		if !validBucketName(a) {
			return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: %s: Invalid bucket name", a)
		}
		if g.byAlias(a) != nil {
			return fail(http.StatusConflict, "BucketAlreadyExists", "Bucket already exists")
		}
	}
	return answer{http.StatusOK, g.bucketInfo(g.newBucket(a))}
}

// allowBucketKey follows Garage: flags sent true are set, flags sent false
// keep their value.
func (g *Garage) allowBucketKey(bucketID, keyID string, p Perm) answer {
	if !bucketIDForm.MatchString(bucketID) {
		return fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Invalid bucket id")
	}
	b := g.buckets[strings.ToLower(bucketID)]
	if b == nil {
		return fail(http.StatusNotFound, "NoSuchBucket", "Bucket not found: %s", bucketID)
	}
	if g.keys[keyID] == nil {
		return fail(http.StatusNotFound, "NoSuchAccessKey", "Access key not found: %s", keyID)
	}
	cur := b.perms[keyID]
	cur.Read = cur.Read || p.Read
	cur.Write = cur.Write || p.Write
	cur.Owner = cur.Owner || p.Owner
	b.perms[keyID] = cur
	return answer{http.StatusOK, g.bucketInfo(b)}
}

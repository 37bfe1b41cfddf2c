package backup

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Settings are the provider's endpoint and keys.
type S3Settings struct {
	Endpoint  string // http(s)://host[:port]
	AccessKey string
	SecretKey string
	Region    string
	Bucket    string
	// Transport, when set, carries the requests (tests watch them with it).
	Transport http.RoundTripper
}

// S3Store is the bucket, reached path-style through minio-go.
type S3Store struct {
	core   *minio.Core
	bucket string
}

// redacted is a URL as an error may quote it: a password in it is masked,
// and a value that does not parse but holds userinfo is not quoted at all.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if strings.Contains(raw, "@") {
		return "(not shown: it may hold a password)"
	}
	return raw
}

// NewS3Store builds the client; it makes no request.
func NewS3Store(s S3Settings) (*S3Store, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.User != nil {
		return nil, fmt.Errorf("AWS_ENDPOINT_URL %q is not http(s)://host[:port]", redacted(s.Endpoint))
	}
	core, err := minio.NewCore(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    s.Transport,
		MaxRetries:   3,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client: %w", err)
	}
	return &S3Store{core: core, bucket: s.Bucket}, nil
}

// Every upload sends the body's SHA-256 as x-amz-content-sha256, inside the
// signature, so the provider refuses a body that differs from what was
// signed; DisableContentSha256 turns off minio-go's chunked streaming
// signature (used over plain HTTP) so the header carries the real digest.
// x-amz-checksum-sha256 makes the provider store the digest, for the read
// back and the restore.
func putOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{DisableContentSha256: true, ContentType: "application/octet-stream"}
}

// Put implements ObjectStore.
func (s *S3Store) Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sums Sums) error {
	opts := putOptions()
	opts.UserMetadata = map[string]string{"x-amz-checksum-sha256": sums.SHA256Base64()}
	_, err := s.core.PutObject(ctx, s.bucket, key, body, size, "", sums.SHA256Hex(), opts)
	return err
}

// StartMultipart implements ObjectStore.
func (s *S3Store) StartMultipart(ctx context.Context, key string) (string, error) {
	opts := putOptions()
	opts.UserMetadata = map[string]string{"x-amz-checksum-algorithm": "SHA256", "x-amz-checksum-type": "COMPOSITE"}
	return s.core.NewMultipartUpload(ctx, s.bucket, key, opts)
}

// PutPart implements ObjectStore.
func (s *S3Store) PutPart(ctx context.Context, key, upload string, part Part, body io.ReadSeeker) (string, error) {
	header := http.Header{}
	header.Set("x-amz-checksum-sha256", part.Sums.SHA256Base64())
	uploaded, err := s.core.PutObjectPart(ctx, s.bucket, key, upload, part.Number, body, part.Size, minio.PutObjectPartOptions{
		Sha256Hex:            part.Sums.SHA256Hex(),
		DisableContentSha256: true, CustomHeader: header,
	})
	if err != nil {
		return "", err
	}
	return uploaded.ETag, nil
}

// CompleteMultipart implements ObjectStore.
func (s *S3Store) CompleteMultipart(ctx context.Context, key, upload string, parts []Part, etags []string) error {
	complete := make([]minio.CompletePart, len(parts))
	for i, p := range parts {
		complete[i] = minio.CompletePart{PartNumber: p.Number, ETag: etags[i], ChecksumSHA256: p.Sums.SHA256Base64()}
	}
	_, err := s.core.CompleteMultipartUpload(ctx, s.bucket, key, upload, complete, minio.PutObjectOptions{})
	return err
}

// AbortMultipart implements ObjectStore.
func (s *S3Store) AbortMultipart(ctx context.Context, key, upload string) error {
	return s.core.AbortMultipartUpload(ctx, s.bucket, key, upload)
}

// AbortUnfinished implements ObjectStore, for the uploads of keys directly
// under prefix.
func (s *S3Store) AbortUnfinished(ctx context.Context, prefix string) ([]string, error) {
	// Ended on return, so the listing's goroutine stops with it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var aborted []string
	// Listed whole and picked out by key: MinIO lists unfinished uploads
	// under a folder's prefix as none, where S3 lists them.
	for u := range s.core.ListIncompleteUploads(ctx, s.bucket, "", true) {
		if u.Err != nil {
			return aborted, u.Err
		}
		// Directly under prefix only: another volume's folder may sit
		// beneath this one's, and its uploads are its own run's.
		if rest, ok := strings.CutPrefix(u.Key, prefix); !ok || strings.Contains(rest, "/") {
			continue
		}
		if err := s.AbortMultipart(ctx, u.Key, u.UploadID); err != nil {
			return aborted, err
		}
		aborted = append(aborted, u.Key)
	}
	return aborted, nil
}

// Stat implements ObjectStore: a HEAD with the checksum mode on, and for a
// multipart object GetObjectAttributes for its parts' checksums.
func (s *S3Store) Stat(ctx context.Context, key string) (Stored, error) {
	opts := minio.StatObjectOptions{Checksum: true}
	info, err := s.core.StatObject(ctx, s.bucket, key, opts)
	if err != nil {
		return Stored{}, err
	}
	got := Stored{Size: info.Size, ChecksumSHA256: info.ChecksumSHA256}
	if !strings.Contains(got.ChecksumSHA256, "-") {
		return got, nil
	}
	marker := 0
	for {
		attrs, err := s.core.GetObjectAttributes(ctx, s.bucket, key, minio.ObjectAttributesOptions{MaxParts: 1000, PartNumberMarker: marker})
		if err != nil {
			return Stored{}, fmt.Errorf("read the parts: %w", err)
		}
		for _, p := range attrs.ObjectParts.Parts {
			got.Parts = append(got.Parts, StoredPart{Number: p.PartNumber, Size: int64(p.Size), ChecksumSHA256: p.ChecksumSHA256})
		}
		if !attrs.ObjectParts.IsTruncated || attrs.ObjectParts.NextPartNumberMarker <= marker {
			return got, nil
		}
		marker = attrs.ObjectParts.NextPartNumberMarker
	}
}

// List implements ObjectStore.
func (s *S3Store) List(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if obj.Err != nil {
			return nil, obj.Err
		}
		if name, ok := strings.CutPrefix(obj.Key, prefix); ok && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	return names, nil
}

// Get implements ObjectStore.
func (s *S3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	body, _, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	return body, nil
}

// Remove implements ObjectStore.
func (s *S3Store) Remove(ctx context.Context, key string) error {
	return s.core.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
}

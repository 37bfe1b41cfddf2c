// Command garage-catalog applies the bucket catalog deploy-kit renders to
// Garage through its admin API, once, and exits: 0 when Garage and Vault hold
// the catalog, 2 on a bad setting (nothing was done), 1 on a refused catalog
// or a failed call. It never deletes a key, a bucket or a grant.
package main

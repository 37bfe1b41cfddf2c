// Package kubeclient finds the cluster a service runs against, the one way
// every in-cluster service of this module does.
package kubeclient

// Package validate checks the deployment files under deploy/ without a
// cluster or a Docker daemon: the Kubernetes manifests are decoded
// strictly into the Kubernetes API types (k8s.io/api), as the API server
// would decode them, so an unknown or misspelt field or a value of the
// wrong type fails; the references between them (volumes to Secrets and
// the ConfigMap, probes and Service ports to container ports, selectors to
// labels, the files gmgate.yaml names to the mounts that provide them) are
// followed; gmgate.yaml in the ConfigMap and in deploy/compose is loaded by
// gmgate's own configuration loader; and deploy/compose/compose.yaml is
// loaded by the Compose specification's reference loader (compose-go),
// which checks it against the Compose JSON schema; and the Dockerfile's
// final stage is read for what the image ships: its example
// configuration loads, listens on exposed ports uid 10001 may bind and
// logs to a stream, and its HEALTHCHECK runs gmgate health against that
// example's admin listener.
//
// It is a module of its own so that the gateway's module does not depend
// on the Kubernetes and Compose libraries. .ci/run runs it:
//
//	cd deploy/validate && go test ./...
package validate

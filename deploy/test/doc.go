// Package deploytest holds the tests that ship packbot as deployers run it: the container image
// built from the Dockerfile, the compose file brought up by Docker Compose v2, and the Helm
// chart rendered, decoded into Kubernetes API types and run with `podman kube play`. A terminal
// wallet (`packbot wallet --scripted`, built from this checkout) chats with each.
//
// It is a module of its own so that Helm's and Kubernetes' packages stay out of packbot's
// go.mod. The tests need podman (with its Docker-compatible API socket for compose), the local
// base images of bases/build.sh, and a docker-compose binary; .ci/containers installs and
// starts all of them, then runs `go test ./...` here. Without podman the tests skip, unless
// CI=true.
package deploytest

#!/usr/bin/env bash
# magw end to end on real API servers, with kind: for YOUR OWN CI. It is NOT run by this repository's CI or
# tests, whose machines have no Docker daemon and no kind; tests/deploy/test_deploy_workloads.py only checks that bash
# parses this file and that the deploy/ files it applies exist (docs/kubernetes.md says the same).
#
# What it does: builds the image, creates three kind clusters on Docker's "kind" network (a broker and two
# members, east and west, each with a control plane and two workers with non-overlapping pod and service
# CIDRs), applies deploy/ (the broker's namespace, CRDs and role on the broker; namespace, CRDs, RBAC, the
# daemons, a Cluster and the Submariner object on each member), labels both workers of each member as
# gateways, runs a pause pod on every node (kindnet gives a node an address in the pod CIDR only once a pod
# runs there, and the route agent publishes that address), then waits until every Node carries its CNI
# address annotation, the broker holds all four gateways' Endpoints and every Gateway's status shows
# its connections to the other cluster's gateways as connected. On failure it prints the daemons' logs.
#
# Needs: docker, kind >= 0.23 (node images with Kubernetes >= 1.30: ValidatingAdmissionPolicy v1 and the
# node name in service account tokens), kubectl, and a host kernel with vxlan and nexthop groups (>= 5.3).
#
#   scripts/e2e-kind.sh                  # everything, then delete the clusters
#   KEEP=1 scripts/e2e-kind.sh           # leave the clusters running to look around
#   NODE_IMAGE=kindest/node:v1.31.4 scripts/e2e-kind.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-magw-e2e}
IMAGE=${IMAGE:-magw:0.1.0}
NODE_IMAGE=${NODE_IMAGE:-}
TIMEOUT=${TIMEOUT:-300}
NS=submariner-operator
BROKER_NS=submariner-k8s-broker
MEMBERS=(east west)
declare -A POD_CIDR=([east]=10.10.0.0/16 [west]=10.20.0.0/16)
declare -A SERVICE_CIDR=([east]=10.110.0.0/16 [west]=10.120.0.0/16)

work=$(mktemp -d)
say() { printf '\n== %s\n' "$*"; }
ctx() { echo "kind-$PREFIX-$1"; }
k() { local cluster=$1; shift; kubectl --context "$(ctx "$cluster")" "$@"; }

cleanup() {
  local status=$?
  if ((status != 0)); then
    say "failed (exit $status): the daemons' logs"
    for c in "${MEMBERS[@]}"; do
      for ds in magw-route-agent magw-gateway; do
        k "$c" -n "$NS" logs "daemonset/$ds" --all-containers --tail=50 2>/dev/null || true
      done
      k "$c" -n "$NS" logs deployment/magw-globalnet --tail=50 2>/dev/null || true
    done
  fi
  if [ -z "${KEEP:-}" ]; then
    for c in broker "${MEMBERS[@]}"; do kind delete cluster --name "$PREFIX-$c" >/dev/null 2>&1 || true; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# wait_for DESCRIPTION COMMAND...: run COMMAND every 5 s until it succeeds, at most $TIMEOUT seconds.
wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      echo "timed out after ${TIMEOUT}s waiting for: $what" >&2
      return 1
    fi
    sleep 5
  done
  echo "ok: $what"
}

create_cluster() {
  local name=$1 workers=$2 pods=${3:-} services=${4:-}
  {
    echo "kind: Cluster"
    echo "apiVersion: kind.x-k8s.io/v1alpha4"
    if [ -n "$pods" ]; then
      echo "networking: {podSubnet: \"$pods\", serviceSubnet: \"$services\"}"
    fi
    echo "nodes:"
    echo "  - role: control-plane"
    for ((i = 0; i < workers; i++)); do echo "  - role: worker"; done
  } >"$work/$name.kind.yaml"
  kind create cluster --name "$PREFIX-$name" --config "$work/$name.kind.yaml" ${NODE_IMAGE:+--image "$NODE_IMAGE"} --wait 120s
}

say "building $IMAGE"
docker build -t "$IMAGE" .

say "creating the broker and the member clusters"
create_cluster broker 0
for c in "${MEMBERS[@]}"; do create_cluster "$c" 2 "${POD_CIDR[$c]}" "${SERVICE_CIDR[$c]}"; done

say "broker: namespace, the Cluster and Endpoint CRDs, the members' role"
k broker apply -f deploy/crds/submariner.io_clusters.yaml -f deploy/crds/submariner.io_endpoints.yaml
k broker apply -f deploy/broker/namespace.yaml
k broker apply -f deploy/broker/rbac.yaml
wait_for "the broker client's token" \
  bash -c "[ -n \"\$(kubectl --context $(ctx broker) -n $BROKER_NS get secret magw-broker-client-token -o jsonpath='{.data.token}')\" ]"

# The members reach the broker's API server at its node's address on the kind network (in its certificate).
broker_ip=$(docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$PREFIX-broker-control-plane")
token=$(k broker -n "$BROKER_NS" get secret magw-broker-client-token -o jsonpath='{.data.token}' | base64 -d)
ca=$(k broker -n "$BROKER_NS" get secret magw-broker-client-token -o jsonpath='{.data.ca\.crt}')
cat >"$work/broker-kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: broker
    cluster:
      server: https://$broker_ip:6443
      certificate-authority-data: $ca
users:
  - name: magw-broker-client
    user:
      token: $token
contexts:
  - name: broker
    context: {cluster: broker, user: magw-broker-client, namespace: $BROKER_NS}
current-context: broker
EOF

for c in "${MEMBERS[@]}"; do
  say "$c: image, namespace, CRDs, RBAC, broker kubeconfig, daemons, Cluster, Submariner"
  kind load docker-image "$IMAGE" --name "$PREFIX-$c"
  k "$c" apply -f deploy/namespace.yaml
  k "$c" apply -f deploy/crds/
  k "$c" wait --for condition=Established --timeout=60s \
    crd/clusters.submariner.io crd/endpoints.submariner.io crd/gateways.submariner.io crd/submariners.submariner.io
  k "$c" apply -f deploy/rbac/
  k "$c" -n "$NS" create secret generic magw-broker-kubeconfig --from-file=kubeconfig="$work/broker-kubeconfig" \
    --dry-run=client -o yaml | k "$c" apply -f -
  sed "s/^  clusterID: .*/  clusterID: $c/" deploy/magw.yaml | k "$c" apply -f -
  k "$c" apply -f - <<EOF
apiVersion: submariner.io/v1
kind: Cluster
metadata: {name: $c, namespace: $NS}
spec: {cluster_id: $c, cluster_cidr: ["${POD_CIDR[$c]}"], service_cidr: ["${SERVICE_CIDR[$c]}"]}
EOF
  sed "s/clusterID: .*/clusterID: $c/" deploy/examples/submariner.yaml | k "$c" apply -f -
  k "$c" label node "$PREFIX-$c-worker" "$PREFIX-$c-worker2" submariner.io/gateway=true --overwrite
  # The route agent publishes as the node's CNI address its first local address inside the pod CIDR. kindnet
  # (ptp) puts one on the host side of each pod's veth, so every node needs a pod: one pause pod per node.
  k "$c" apply -f - <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cni-address, namespace: default}
spec:
  selector: {matchLabels: {app: cni-address}}
  template:
    metadata: {labels: {app: cni-address}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: pause, image: "registry.k8s.io/pause:3.10"}]
EOF
done

# cni_annotated CLUSTER: every Node of CLUSTER carries the route agent's submariner.io/cniIfaceIp annotation.
cni_annotated() {
  local nodes missing
  nodes=$(k "$1" get nodes \
    -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.annotations.submariner\.io/cniIfaceIp}{"\n"}{end}') ||
    return 1
  missing=$(grep -c '=$' <<<"$nodes" || true)
  echo "  $1: nodes without a CNI address: $missing"
  ((missing == 0))
}

for c in "${MEMBERS[@]}"; do
  say "$c: daemons ready, every Node annotated with its CNI address"
  k "$c" -n default rollout status daemonset/cni-address --timeout="${TIMEOUT}s"
  k "$c" -n "$NS" rollout status daemonset/magw-route-agent --timeout="${TIMEOUT}s"
  k "$c" -n "$NS" rollout status daemonset/magw-gateway --timeout="${TIMEOUT}s"
  k "$c" -n "$NS" rollout status deployment/magw-globalnet --timeout="${TIMEOUT}s"
  wait_for "$c: submariner.io/cniIfaceIp on every Node" cni_annotated "$c"
done

say "the broker holds every gateway's Endpoint"
endpoints_in_broker() {
  local n
  n=$(k broker -n "$BROKER_NS" get endpoints.submariner.io -o name | wc -l)
  echo "  broker Endpoints: $n of 4"
  ((n == 4))
}
wait_for "4 Endpoints in the broker (2 gateways x 2 clusters)" endpoints_in_broker

say "every Gateway's status shows its connections to the other cluster as connected"
gateways_connected() {
  local c line ok=0
  for c in "${MEMBERS[@]}"; do
    while read -r line; do
      echo "  $c: $line"
      # <gateway> <haStatus> <status of each connection...>: two connected peers, nothing else.
      [[ $line =~ ^[^[:space:]]+\ active\ connected\ connected$ ]] || ok=1
    done < <(k "$c" -n "$NS" get gateways.submariner.io \
      -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.haStatus}{" "}{.status.connections[*].status}{"\n"}{end}')
    (($(k "$c" -n "$NS" get gateways.submariner.io -o name | wc -l) == 2)) || ok=1
  done
  return $ok
}
wait_for "both gateways of each cluster active and connected to both of the other" gateways_connected

say "passed"

#!/usr/bin/env bash
# Builds every image the stack needs on a machine that reaches no image registry (only Debian's
# package mirror and PyPI): a Debian base made with debootstrap, a Python base on it, the consumer
# and spark-job images from their public Dockerfiles (base image passed as a build argument),
# PostgreSQL from Debian's package, Apache Kafka from the Maven artifacts jars/pom.xml pins (on
# Debian's JRE 17) and Marquez Web served from its prebuilt bundle. Base images that exist are kept
# (--rebuild builds them again); the Kafka, consumer and spark-job images are always rebuilt from
# the working tree.
#
#   deploy/local-images.sh [--rebuild]
#
# Needs root (debootstrap), a running Docker engine and Maven (installed from Debian when missing:
# it fetches the Kafka jars through this machine's Maven configuration). Marquez Web is the
# prebuilt bundle in tests/fixtures/external/marquez-web (another build: $MARQUEZ_WEB_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=${LOCAL_IMAGE_PREFIX:-lineage-local}
suite=${DEBIAN_SUITE:-bookworm}
rebuild=false
[ "${1:-}" = "--rebuild" ] && rebuild=true

say() { echo "local-images: $*" >&2; }

# Temporary files and folders live under one directory, removed however the script ends.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
scratch_dir() { mktemp -d -p "$scratch"; }

have_image() { ! $rebuild && docker image inspect "$1" >/dev/null 2>&1; }

# The Debian mirror apt already uses here (deb822 .sources first, then sources.list lines).
debian_mirror() {
    local mirror
    mirror=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1 || true)
    if [ -z "$mirror" ]; then
        mirror=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -n1 || true)
    fi
    echo "${mirror:-http://deb.debian.org/debian}"
}

# The CA bundle this machine's pip trusts (a TLS-intercepting proxy's CA may be in it).
pip_ca_bundle() {
    local cert=${PIP_CERT:-}
    if [ -z "$cert" ]; then
        cert=$(python3 -m pip config get global.cert 2>/dev/null | tr -d "'\"" || true)
    fi
    if [ -n "$cert" ] && [ -f "$cert" ]; then echo "$cert"; fi
}

build() {  # build IMAGE DOCKERFILE CONTEXT [--build-arg ...]
    local image=$1 dockerfile=$2 context=$3
    shift 3
    if have_image "$image"; then say "$image exists"; return; fi
    build_always "$image" "$dockerfile" "$context" "$@"
}

build_always() {  # our own images: Docker's layer cache makes an unchanged rebuild quick
    local image=$1 dockerfile=$2 context=$3 log previous
    shift 3
    say "building $image"
    previous=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
    # The classic builder (no buildx plugin needed); its output is shown only when the build fails.
    log=$(scratch_dir)/build.log
    if ! DOCKER_BUILDKIT=0 docker build --network host -t "$image" -f "$dockerfile" "$@" "$context" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        say "building $image failed"
        exit 1
    fi
    # The image this build replaced, unless something still uses it (then Docker refuses).
    if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
        docker image rm "$previous" >/dev/null 2>&1 || true
    fi
}

debian_base() {
    local image=$prefix/debian:$suite
    if have_image "$image"; then say "$image exists"; return; fi
    local dir log ca
    dir=$(scratch_dir)
    log=$(scratch_dir)/debootstrap.log
    say "debootstrap $suite from $(debian_mirror) (a few minutes)"
    debootstrap --variant=minbase "$suite" "$dir" "$(debian_mirror)" >"$log" 2>&1 \
        || { tail -n 20 "$log" >&2; say "debootstrap failed"; exit 1; }
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    local changes=()
    ca=$(pip_ca_bundle)
    if [ -n "$ca" ]; then
        # Under its own path: Debian's ca-certificates rewrites the standard bundle.
        install -D -m 0644 "$ca" "$dir/usr/local/share/pip-ca/ca-bundle.crt"
        changes=(--change "ENV PIP_CERT=/usr/local/share/pip-ca/ca-bundle.crt")
    fi
    tar -C "$dir" -c . | docker import "${changes[@]}" - "$image" >/dev/null
}

# Apache Kafka at the version jars/pom.xml pins (the image's tag): its jars, resolved by Maven
# (`python -m jars`), and the start-up files of deploy/local/kafka-image. Rebuilt every time, as
# our own images are (the jars come from Maven's local repository, the layers from Docker's cache).
kafka_version() { sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' jars/pom.xml; }

kafka() {
    if ! command -v mvn >/dev/null 2>&1; then
        say "installing maven (it fetches the Kafka jars)"
        apt-get update -q >/dev/null && apt-get install -y -q maven >/dev/null
    fi
    local context
    context=$(scratch_dir)
    cp deploy/local/kafka-image/* "$context/"
    python3 -m jars copy kafka "$context/libs" >/dev/null
    build_always "$prefix/kafka:$(kafka_version)" deploy/local/kafka.Dockerfile "$context" \
        --build-arg "BASE_IMAGE=$prefix/debian:$suite"
}

marquez_web_dir() {
    local dir=${MARQUEZ_WEB_DIR:-$root/tests/fixtures/external/marquez-web}
    if [ ! -f "$dir/dist/index.html" ]; then
        say "no prebuilt Marquez Web at $dir/dist (set MARQUEZ_WEB_DIR)"
        exit 1
    fi
    echo "$dir"
}

marquez_web() {
    local image=$prefix/marquez-web
    if have_image "$image"; then say "$image exists"; return; fi
    local web context
    web=$(marquez_web_dir)
    context=$(scratch_dir)
    cp -r "$web/dist" "$context/dist"
    cp "$web/LICENSE" "$context/dist/LICENSE.marquez-web" 2>/dev/null || true
    cp deploy/local/marquez_web_server.py "$context/"
    build "$image" deploy/local/marquez-web.Dockerfile "$context" --build-arg "BASE_IMAGE=$prefix/python:3.11"
}

debian_base
build "$prefix/python:3.11" deploy/local/python.Dockerfile deploy/local --build-arg "BASE_IMAGE=$prefix/debian:$suite"
build "$prefix/postgres:15" deploy/local/postgres.Dockerfile deploy/local --build-arg "BASE_IMAGE=$prefix/debian:$suite"
kafka
marquez_web
build_always "$prefix/consumer" deploy/consumer.Dockerfile . --build-arg "BASE_IMAGE=$prefix/python:3.11"
build_always "$prefix/spark-job" deploy/spark-job.Dockerfile . --build-arg "BASE_IMAGE=$prefix/debian:$suite"
say "done"

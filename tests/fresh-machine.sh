#!/bin/sh
# tests/fresh-machine.sh - prove the README's two commands work the first
# time on a Debian 12 machine that has none of the project's -dev packages:
# clone the committed HEAD of a branch, run `make run` until the daemon
# answers GET /api/v1/status, stop it, run `make test`, print the last lines.
# Not part of `make test` (it installs packages and takes minutes). Run it
# as root.
#
# Usage: tests/fresh-machine.sh [--host --yes] [BRANCH]     (default main)
#
# Default (chroot) mode touches nothing on this machine's packages: it makes
# a minimal Debian 12 (bookworm) root with debootstrap under $SL_FRESH_DIR
# (default /var/tmp/sl-fresh), holding only what a fresh developer machine
# has (the base system plus build-essential, git, ca-certificates, make),
# mounts /proc, /sys and /dev inside, and runs the two commands there. The
# downloaded packages and the installed base are cached in that folder
# (bookworm-debs.tgz, base.tar), so later runs start from a fresh copy of
# the base in seconds; delete the folder to start over. Needs debootstrap
# (installed with apt-get when missing) and Debian's mirror
# ($SL_FRESH_MIRROR, default http://deb.debian.org/debian).
#
# --host mode is DESTRUCTIVE: it runs on this machine itself after purging
# libopenblas-dev libjansson-dev libmicrohttpd-dev check libnanomsg-dev
# libncurses-dev zlib1g-dev pkg-config pkgconf (and whatever depends on
# them), as the issue describes. It refuses to start without --yes.
#
# Exit status: 0 when the daemon answered and `make test` passed.
set -u

usage() {
	sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}

host=0 yes=0 branch=main
while [ $# -gt 0 ]; do
	case $1 in
	--host) host=1 ;;
	--yes) yes=1 ;;
	-h|--help) usage ;;
	-*) echo "fresh-machine: unknown option $1" >&2; usage ;;
	*) branch=$1 ;;
	esac
	shift
done

[ "$(id -u)" -eq 0 ] || { echo "fresh-machine: run as root" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
git -C "$src" rev-parse --verify -q "refs/heads/$branch" >/dev/null ||
	{ echo "fresh-machine: no branch '$branch' in $src" >&2; exit 2; }
dir=${SL_FRESH_DIR:-/var/tmp/sl-fresh}
mirror=${SL_FRESH_MIRROR:-http://deb.debian.org/debian}
timeout=${SL_FRESH_TIMEOUT:-3600} # seconds for `make run` to answer
mkdir -p "$dir/logs"
t_start=$(date +%s)

say() { echo "fresh-machine: [$(( $(date +%s) - t_start ))s] $*"; }

# a free TCP port on loopback
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + $$ % 20000))
}

# ---- the machine: a chroot, or this host --------------------------------

root=$dir/root
mounted=0

umount_all() {
	[ "$mounted" -eq 1 ] || return 0
	for m in dev sys proc; do
		umount -R "$root/$m" 2>/dev/null || umount -l "$root/$m" 2>/dev/null
	done
	mounted=0
}

is_mounted_below() { # PATH: anything mounted at or below it?
	awk -v p="$1" '$2 == p || index($2, p "/") == 1 { f = 1 } END { exit !f }' /proc/mounts
}

make_base() {
	if ! command -v debootstrap >/dev/null; then
		say "installing debootstrap on this machine"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
			{ echo "fresh-machine: cannot install debootstrap" >&2; exit 1; }
	fi
	incl=build-essential,git,ca-certificates,make
	if [ ! -s "$dir/bookworm-debs.tgz" ]; then
		say "downloading Debian 12 (minbase + $incl) from $mirror"
		rm -rf "$dir/mk"
		debootstrap --variant=minbase --include=$incl \
			--make-tarball="$dir/bookworm-debs.tgz.part" bookworm "$dir/mk" "$mirror" \
			>"$dir/logs/debootstrap.log" 2>&1 ||
			{ tail -n 20 "$dir/logs/debootstrap.log"; exit 1; }
		mv "$dir/bookworm-debs.tgz.part" "$dir/bookworm-debs.tgz"
		rm -rf "$dir/mk"
	fi
	say "installing the base system (once; cached in $dir/base.tar)"
	rm -rf --one-file-system "$dir/base"
	debootstrap --variant=minbase --include=$incl \
		--unpack-tarball="$dir/bookworm-debs.tgz" bookworm "$dir/base" "$mirror" \
		>"$dir/logs/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$dir/logs/debootstrap.log"; exit 1; }
	# what a fresh install's apt sees: the release, its updates, security
	cat >"$dir/base/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
	rm -rf "$dir/base/var/cache/apt/archives/"*.deb
	tar -C "$dir/base" -cf "$dir/base.tar.part" . && mv "$dir/base.tar.part" "$dir/base.tar"
	rm -rf --one-file-system "$dir/base"
}

setup_chroot() {
	if is_mounted_below "$root"; then
		echo "fresh-machine: something is still mounted under $root (an earlier run?); unmount it first" >&2
		exit 1
	fi
	[ -s "$dir/base.tar" ] || make_base
	say "a fresh copy of the base system in $root"
	rm -rf --one-file-system "$root"
	mkdir -p "$root"
	tar -C "$root" -xf "$dir/base.tar" || exit 1
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	# the network this machine reaches the registries through: its own
	# certificate authorities (a proxy's, where there is one) are trusted
	# in the chroot too, as on any machine of this workplace
	if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
		mkdir -p "$root/usr/local/share/ca-certificates"
		cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
		chroot "$root" update-ca-certificates >/dev/null 2>&1 ||
			cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
	fi
	mounted=1
	mount -t proc proc "$root/proc" &&
		mount -t sysfs sys "$root/sys" &&
		mount --rbind /dev "$root/dev" &&
		mount --make-rslave "$root/dev" ||
		{ echo "fresh-machine: cannot mount /proc, /sys, /dev in $root" >&2; exit 1; }
	work=/root/stalelab
	checkout=$root$work
}

setup_host() {
	if [ "$yes" -ne 1 ]; then
		echo "fresh-machine: --host purges the project's -dev packages from THIS machine; add --yes to do it" >&2
		exit 2
	fi
	pkgs="libopenblas-dev libjansson-dev libmicrohttpd-dev check libnanomsg-dev libncurses-dev zlib1g-dev pkg-config pkgconf"
	say "purging from this machine: $pkgs"
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $pkgs >"$dir/logs/purge.log" 2>&1 ||
		{ tail -n 20 "$dir/logs/purge.log"; exit 1; }
	work=$(mktemp -d "${TMPDIR:-/tmp}/sl-fresh-host.XXXXXX")/stalelab
	checkout=$work
}

# machine_cmd CMD: a sh command line that runs CMD in the machine's
# checkout (a clean environment in the chroot, as a login would give)
machine_cmd() {
	if [ "$host" -eq 1 ]; then
		printf "cd '%s' && %s" "$work" "$1"
	else
		# Node.js trusts its own list of authorities, not the system's,
		# unless told: pass the host's setting on (npm fetches uPlot)
		printf "exec env -i HOME=/root LANG=C.UTF-8 TERM=dumb %s %s %s chroot '%s' sh -c 'cd %s && %s'" \
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
			"${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}" \
			"${NODE_EXTRA_CA_CERTS:+NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS}" \
			"$root" "$work" "$1"
	fi
}

run_pid=
finish() {
	if [ -n "$run_pid" ]; then
		kill -TERM "-$run_pid" 2>/dev/null
		wait "$run_pid" 2>/dev/null
	fi
	umount_all
}
trap finish EXIT
trap 'exit 130' INT TERM

if [ "$host" -eq 1 ]; then setup_host; else setup_chroot; fi

rev=$(git -C "$src" rev-parse --short "refs/heads/$branch")
say "cloning $branch ($rev) into $work"
git clone -q --branch "$branch" --single-branch "$src" "$checkout" || exit 1

# the machine must really lack what make deps installs
devpkgs="libopenblas-dev libjansson-dev libmicrohttpd-dev check libnanomsg-dev libncurses-dev zlib1g-dev pkg-config"
present=$(sh -c "$(machine_cmd "for p in $devpkgs; do dpkg -s \$p 2>/dev/null | grep -q \"^Status: install ok installed\" && echo \$p; done; command -v pkg-config")")
if [ -n "$present" ]; then
	say "FAIL: not a fresh machine, already installed: $(echo $present)"
	exit 1
fi
say "none of $devpkgs is installed, no pkg-config"

# ---- make run: until the daemon answers ----------------------------------

port=$(free_port)
say "make run PORT=$port (installs the packages, builds, serves)"
t0=$(date +%s)
# its own process group, so the daemon under make stops with it
setsid sh -c "$(machine_cmd "exec make run PORT=$port")" >"$dir/logs/make-run.log" 2>&1 &
run_pid=$!
answered=0
while [ $(( $(date +%s) - t0 )) -lt "$timeout" ]; do
	if curl -sf "http://127.0.0.1:$port/api/v1/status" >"$dir/logs/status.json" 2>/dev/null; then
		answered=1
		break
	fi
	kill -0 "$run_pid" 2>/dev/null || break
	sleep 2
done
t_run=$(( $(date +%s) - t0 ))
if [ "$answered" -ne 1 ]; then
	say "FAIL: make run did not answer on port $port (after ${t_run}s); its last lines:"
	tail -n 30 "$dir/logs/make-run.log"
	exit 1
fi
say "make run answered after ${t_run}s: $(head -c 160 "$dir/logs/status.json")"
kill -TERM "-$run_pid" 2>/dev/null
wait "$run_pid" 2>/dev/null
run_pid=
say "make run's last lines:"
tail -n 5 "$dir/logs/make-run.log"

# ---- make test --------------------------------------------------------------

say "make test"
t0=$(date +%s)
sh -c "$(machine_cmd "make test")" >"$dir/logs/make-test.log" 2>&1
rc=$?
t_test=$(( $(date +%s) - t0 ))
say "make test exited $rc after ${t_test}s; its last lines:"
tail -n 15 "$dir/logs/make-test.log"
say "total $(( $(date +%s) - t_start ))s (make run ${t_run}s to answer, make test ${t_test}s); logs in $dir/logs"
[ "$rc" -eq 0 ] && echo "fresh-machine: PASS" || echo "fresh-machine: FAIL"
exit "$rc"

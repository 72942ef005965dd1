#!/bin/sh
# restart-workload.sh MNT DIR SECONDS STOP
#
# The guest's side of TestLinuxRestarts. In the new directory MNT on an
# NFS mount (several copies of the script run side by side), until the
# file STOP appears (for at most SECONDS seconds and 100000 rounds),
# each round writes a file of random bytes (sizes from 1 byte to past
# 1 MiB, so WRITEs of one call and of several), renames it, appends a line
# to a journal file on the mount, drops the page, dentry and inode caches
# so that what follows goes to the server, reads the file back and
# compares its SHA-256 with what was written, and removes the file of two
# rounds before. Every fifth round also makes a directory, moves the file
# into it and back, and removes the directory. At the end the journal must
# hold every line appended, and MNT must be empty once the last files are
# removed; then MNT is removed.
#
# DIR is a local directory (tmpfs) for the source files and the journal's
# copy. The script prints a line per round and stops at the first command
# that fails, saying what failed; it writes its exit status to DIR/rc. It
# retries nothing: on a hard mount, a server restart must be invisible to
# it.
set -u
mnt=$1
dir=$2
secs=$3
stop=$4
i=0
fail() {
	echo "FAIL in round $i: $*"
	echo 1 >"$dir/rc"
	exit 1
}
mkdir -p "$dir" || exit 1
rm -f "$dir/rc"
mkdir "$mnt" || fail "mkdir $mnt"
# 4 keeps the kernel from logging each drop of the caches.
echo 4 >/proc/sys/vm/drop_caches || fail "silencing drop_caches"
: >"$dir/journal" || fail "emptying $dir/journal"
: >"$mnt/journal" || fail "creating $mnt/journal"
end=$(($(date +%s) + secs))
set -- 1 4095 4096 65536 131073 1048579 300000
while [ ! -e "$stop" ] && [ "$(date +%s)" -lt "$end" ] && [ "$i" -lt 100000 ]; do
	i=$((i + 1))
	eval n=\${$((i % $# + 1))}
	head -c "$n" /dev/urandom >"$dir/src" || fail "writing $n random bytes to $dir/src"
	want=$(sha256sum "$dir/src") || fail "sha256sum $dir/src"
	want=${want%% *}
	cp "$dir/src" "$mnt/w.$i" || fail "cp $dir/src $mnt/w.$i ($n bytes)"
	mv "$mnt/w.$i" "$mnt/r.$i" || fail "mv $mnt/w.$i $mnt/r.$i"
	echo "round $i $n $want" >>"$mnt/journal" || fail "appending to $mnt/journal"
	echo "round $i $n $want" >>"$dir/journal"
	echo 3 >/proc/sys/vm/drop_caches || fail "dropping the caches"
	got=$(sha256sum "$mnt/r.$i") || fail "sha256sum $mnt/r.$i"
	got=${got%% *}
	[ "$got" = "$want" ] || fail "$mnt/r.$i ($n bytes) read back with SHA-256 $got, written with $want"
	if [ "$i" -gt 2 ]; then
		rm "$mnt/r.$((i - 2))" || fail "rm $mnt/r.$((i - 2))"
	fi
	if [ $((i % 5)) -eq 0 ]; then
		mkdir "$mnt/d.$i" || fail "mkdir $mnt/d.$i"
		mv "$mnt/r.$i" "$mnt/d.$i/f" || fail "mv $mnt/r.$i $mnt/d.$i/f"
		mv "$mnt/d.$i/f" "$mnt/r.$i" || fail "mv $mnt/d.$i/f $mnt/r.$i"
		rmdir "$mnt/d.$i" || fail "rmdir $mnt/d.$i"
	fi
	echo "ok $i $n"
done
echo 3 >/proc/sys/vm/drop_caches || fail "dropping the caches"
cmp "$dir/journal" "$mnt/journal" || fail "the journal on the mount differs from the lines appended"
lines=$(wc -l <"$mnt/journal") || fail "wc -l $mnt/journal"
rm -f "$mnt/r.$((i - 1))" "$mnt/r.$i" "$mnt/journal" || fail "removing the last files"
left=$(ls -A "$mnt") || fail "ls -A $mnt"
[ -z "$left" ] || fail "left in $mnt: $left"
rmdir "$mnt" || fail "rmdir $mnt"
echo "done: $i rounds, $lines journal lines"
echo 0 >"$dir/rc"

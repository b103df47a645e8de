/**
 * The helper. Each line is hex fields, the first the kind:
 *  - `run` id timeout(ms) program input n args... NAME=value...: runs the
 *    program with exactly that environment, the input on its stdin;
 *    answered `ran` id code(-1 for a signal) signal timedOut(1/0) stdout
 *    stderr. A program that cannot be run answers 127 with the reason on its
 *    stderr. Timeouts are kept to the second (perl-base's `time`).
 *  - `spawn` id stdoutPath stderrPath pidnsPath procs script n argv...
 *    NAME=value...: a sandbox's monitor (bwrap behind its entry), in a
 *    session of its own,
 *    from /, its stdin /dev/null, its stdout and stderr the instance's
 *    pipes opened read-write (instance-io.ts), fd 3 its status pipe, fd 4
 *    its block pipe, fd 5 the PID namespace file when given. A script that is
 *    not empty is perl the forked process runs itself, with argv as its
 *    @ARGV, in place of a new perl (`perl -e script argv...`): one program
 *    start less, and no perl start-up reading the environment given (it
 *    must end in an exec: its end is the monitor's exit). Answered `pid`
 *    id pid, then `status` id data for what it writes on fd 3, `closed` id
 *    when fd 3 closes, `exit` id code(-1 for a signal) signal once reaped
 *    (after whatever fd 3 held then);
 *    `failed` id reason when it could not be started. procs, when not
 *    empty, is cgroup.procs files joined by NUL: once the status names the
 *    sandbox's PID 1 (bwrap's `child-pid`), the helper writes that pid to
 *    each in turn and lets it go (as `go` does), answered `placed` id
 *    before the status that named it; a pid already gone (ESRCH) ends the
 *    writes, its exit being what the start reports. A write refused
 *    otherwise kills PID 1, still held, and is answered `placed` id file
 *    errno pid instead.
 *  - `bare` id stdoutPath stderrPath cwd n argv... NAME=value...: a bare
 *    container process, in a session of its own, from cwd, its stdin
 *    /dev/null, its stdout and stderr the instance's pipes, and no other fd.
 *    Answered `pid` id pid once its exec has succeeded (a close-on-exec
 *    pipe tells), then `exit` as for `spawn`; or `failed` id reason errno
 *    when the chdir or the exec failed (the child reaped).
 *  - `go` id: writes to the monitor's block pipe and closes it.
 * Once its stdin closes (vnode is gone, or done with it), the helper lets
 * monitors held at their block fd run, finishes its runs and stays until its
 * monitors have exited (reaping them).
 */
export const HelperScript = `
use strict; use IO::Handle; use IO::Select; use POSIX ();
$SIG{PIPE} = 'IGNORE';
select(STDOUT); $| = 1;
my $sel = IO::Select->new(\\*STDIN); my $open = 1; my $in = ''; my (%jobs, %pipes, %monitors, %blocks, %places);
pipe(my $wake, my $waker) or die; $waker->blocking(0); $sel->add($wake); $SIG{CHLD} = sub { syswrite($waker, 'x') };
sub unhex { pack('H*', $_[0]) }
sub answer { print join(' ', map { unpack('H*', $_) } @_), "\\n" }
sub environment { %ENV = map { /^([^=]*)=(.*)$/s ? ($1, $2) : () } @_ }
sub run {
  my ($id, $timeout, $file, $input, $n, @f) = @_;
  my @args = splice(@f, 0, $n);
  my ($ir, $iw, $or, $ow, $er, $ew);
  pipe($ir, $iw) && pipe($or, $ow) && pipe($er, $ew) or return answer('ran', $id, 127, 0, 0, '', "pipe: $!");
  my $pid = fork();
  return answer('ran', $id, 127, 0, 0, '', "fork: $!") unless defined $pid;
  if ($pid == 0) {
    open(STDIN, '<&', $ir); open(STDOUT, '>&', $ow); open(STDERR, '>&', $ew); $SIG{PIPE} = 'DEFAULT'; $SIG{CHLD} = 'DEFAULT';
    environment(@f);
    exec { $file } $file, @args; print STDERR "exec $file: $!\\n"; POSIX::_exit(127);
  }
  close($ir); close($ow); close($ew);
  my $off = 0; while ($off < length $input) { my $w = syswrite($iw, $input, length($input) - $off, $off); last unless $w; $off += $w }
  close($iw);
  $jobs{$pid} = {id => $id, out => '', err => '', open => 2, deadline => time + $timeout / 1000};
  for ([$or, 'out'], [$er, 'err']) { $sel->add($_->[0]); $pipes{fileno $_->[0]} = [$pid, $_->[1], $_->[0]] }
}
sub spawn {
  my ($id, $stdout, $stderr, $pidns, $procs, $script, $n, @f) = @_;
  my @argv = splice(@f, 0, $n);
  my ($sr, $sw, $br, $bw, $ns, $o, $e);
  pipe($sr, $sw) && pipe($br, $bw) or return answer('failed', $id, "pipe: $!");
  open($o, '+<', $stdout) && open($e, '+<', $stderr) or return answer('failed', $id, "open: $!");
  if ($pidns ne '') { open($ns, '<', $pidns) or return answer('failed', $id, "$pidns: $!") }
  my $pid = fork();
  return answer('failed', $id, "fork: $!") unless defined $pid;
  if ($pid == 0) {
    container_fds([], $o, $e, $sw, $br, $ns ? $ns : ());
    chdir('/');
    environment(@f);
    if ($script ne '') { @ARGV = @argv; eval "no strict; $script"; print STDERR "vnode-helper: $@"; POSIX::_exit(127) }
    exec { $argv[0] } @argv; print STDERR "exec $argv[0]: $!\\n"; POSIX::_exit(127);
  }
  close($sw); close($br); close($o); close($e); close($ns) if $ns;
  $monitors{$pid} = $id; $blocks{$id} = $bw;
  $places{$id} = {files => [split(/\\0/, $procs)], seen => ''} if $procs ne '';
  $sel->add($sr); $pipes{fileno $sr} = [$pid, 'status', $sr, $id];
  answer('pid', $id, $pid);
}
# Once the status so far names the sandbox's PID 1: it joins its cgroups and goes (see spawn above).
sub place {
  my ($id, $data) = @_;
  my $p = $places{$id} or return;
  $p->{seen} .= $data;
  return unless $p->{seen} =~ /"child-pid"\\s*:\\s*(\\d+)\\D/;
  my $child = $1; delete $places{$id};
  for my $f (@{$p->{files}}) {
    my $h; my $ok = open($h, '>', $f) && defined(syswrite($h, $child)); my $errno = $! + 0; close($h) if $h;
    next if $ok; last if $errno == POSIX::ESRCH();
    kill('KILL', $child); return answer('placed', $id, $f, $errno, $child);
  }
  answer('placed', $id); go($id);
}
# In the fork for a container: the signals' defaults back, a session of its own, stdin /dev/null, the handles given as
# fds 1, 2, 3... in order, and no other fd but the numbers in @$keep.
sub container_fds {
  my ($keep, @handles) = @_;
  $SIG{PIPE} = 'DEFAULT'; $SIG{CHLD} = 'DEFAULT';
  POSIX::setsid();
  my @from = map { POSIX::dup(fileno $_) } @handles;
  open(STDIN, '<', '/dev/null');
  for my $i (0 .. $#from) { POSIX::dup2($from[$i], $i + 1) }
  POSIX::close($_) for @from;
  close_others(3 .. $#from + 1, @$keep);
}
# Closes every fd above 2 but those given: a container gets its stdio (and bwrap its status, block and namespace fds),
# never what the helper holds (its pipes to vnode, other monitors') nor what vnode's own parent left open.
sub close_others { my %keep = map { $_ => 1 } @_; opendir(my $d, '/proc/self/fd') or return; my @fds = grep { /^\\d+$/ && $_ > 2 && !$keep{$_} && $_ != fileno($d) } readdir($d); closedir($d); POSIX::close($_) for @fds }
sub bare {
  my ($id, $stdout, $stderr, $cwd, $n, @f) = @_;
  my @argv = splice(@f, 0, $n);
  my ($xr, $xw, $o, $e);
  pipe($xr, $xw) or return answer('failed', $id, "pipe: $!", 0);
  open($o, '+<', $stdout) && open($e, '+<', $stderr) or return answer('failed', $id, "open: $!", 0);
  my $pid = fork();
  return answer('failed', $id, "fork: $!", 0) unless defined $pid;
  if ($pid == 0) {
    close($xr);
    container_fds([fileno $xw], $o, $e);
    chdir($cwd) or do { syswrite($xw, "chdir $cwd: $! " . ($! + 0)); POSIX::_exit(127) };
    environment(@f);
    exec { $argv[0] } @argv; syswrite($xw, "$! " . ($! + 0)); POSIX::_exit(127);
  }
  close($xw); close($o); close($e);
  # The child's end closes at its exec (close-on-exec) or after it wrote why it could not: read to the end.
  my $why = '';
  for (;;) { my $r = sysread($xr, $why, 4096, length $why); next if !defined $r && $! == POSIX::EINTR(); last unless $r }
  close($xr);
  if ($why ne '') { waitpid($pid, 0); my ($reason, $errno) = $why =~ /^(.*) (\\d+)$/s; return answer('failed', $id, $reason // $why, $errno // 0) }
  $monitors{$pid} = $id;
  answer('pid', $id, $pid);
}
sub go { my $b = delete $blocks{$_[0]}; if ($b) { syswrite($b, 'go'); close($b) } }
# A monitor reaped: what its status pipe still holds is answered first (it may have written it after this round's
# select), so its last words (bwrap's exit-code) never come after its exit, which ends its status for vnode.
sub drain {
  my ($id) = @_;
  for my $fd (keys %pipes) {
    my $p = $pipes{$fd};
    next unless $p->[1] eq 'status' && $p->[3] eq $id;
    my $fh = $p->[2]; $fh->blocking(0);
    for (;;) {
      my $buf = ''; my $r = sysread($fh, $buf, 65536);
      if ($r) { answer('status', $id, $buf); next }
      next if !defined $r && $! == POSIX::EINTR();
      last unless defined $r;
      $sel->remove($fh); delete $pipes{$fd}; close($fh); answer('closed', $id); last;
    }
  }
}
sub request {
  my ($kind, @f) = map { unhex($_) } split(/ /, $_[0], -1);
  if ($kind eq 'run') { run(@f) } elsif ($kind eq 'spawn') { spawn(@f) } elsif ($kind eq 'bare') { bare(@f) } elsif ($kind eq 'go') { go(@f) }
}
while ($open || %jobs || %monitors) {
  my @ready = $sel->can_read(%jobs ? 1 : undef);
  for my $fh (@ready) {
    if (fileno($fh) == fileno($wake)) { sysread($wake, my $drained, 4096); next }
    if (fileno($fh) == fileno(STDIN)) {
      my $r = sysread(STDIN, $in, 65536, length $in);
      if (!$r) { $sel->remove(\\*STDIN); $open = 0; close($_) for values %blocks; %blocks = (); next }
      while ($in =~ s/^([^\\n]*)\\n//) { request($1) }
      next;
    }
    my $p = $pipes{fileno $fh}; my $buf = '';
    my $r = sysread($fh, $buf, 65536);
    if ($p->[1] eq 'status') {
      if ($r) { place($p->[3], $buf); answer('status', $p->[3], $buf); next }
      $sel->remove($fh); delete $pipes{fileno $fh}; close($fh); delete $places{$p->[3]}; answer('closed', $p->[3]); next;
    }
    if ($r) { $jobs{$p->[0]}{$p->[1]} .= $buf; next }
    $sel->remove($fh); delete $pipes{fileno $fh}; close($fh); $jobs{$p->[0]}{open}--;
  }
  while ((my $pid = waitpid(-1, POSIX::WNOHANG())) > 0) {
    if ($jobs{$pid}) { $jobs{$pid}{status} = $? }
    elsif (defined(my $id = delete $monitors{$pid})) { my $s = $?; delete $places{$id}; go($id); drain($id); answer('exit', $id, ($s & 127) ? -1 : ($s >> 8), $s & 127) }
  }
  for my $pid (keys %jobs) {
    my $j = $jobs{$pid};
    if (!defined $j->{status} && !$j->{killed} && time > $j->{deadline}) { kill('KILL', $pid); $j->{killed} = 1 }
    next unless defined $j->{status} && $j->{open} == 0;
    my $s = $j->{status};
    answer('ran', $j->{id}, ($s & 127) ? -1 : ($s >> 8), $s & 127, $j->{killed} ? 1 : 0, $j->{out}, $j->{err});
    delete $jobs{$pid};
  }
}
`

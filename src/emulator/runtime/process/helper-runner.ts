import {spawn, type ChildProcess} from 'node:child_process'
import {execa} from 'execa'
import {hostProgram, PerlProgram} from './host-programs.js'

/**
 * Runs the runtime's short helper programs (the CNI plugins on a pod's
 * network and its pool's) from a small perl process, so that vnode does not
 * fork itself for each: libuv forks vnode whole and holds its event loop
 * until the child execs, about 5 ms a program at vnode's size, and a burst of
 * pod deletions runs a plugin per pod. perl forks at a few MiB.
 *
 * Each run is a line on the helper's stdin, its answer a line on its stdout
 * (hex fields: nothing in them is parsed by a shell or split on a space).
 * The helper starts at the first run and is told to go (its stdin closed)
 * once no run has been asked for DefaultHelperIdleMs, and with vnode: it
 * finishes the runs under way, then exits; it is never a node's leftover.
 * Without perl, or once the helper failed to start, execa runs them.
 */

/** How long the helper stays after its last run. */
export const DefaultHelperIdleMs = 10_000
/** Inputs larger than this go through execa (the helper writes an input whole, before it reads the outputs). */
export const MaxHelperInputBytes = 32_768

export interface HelperRun {
  env: Record<string, string>
  input?: string
  timeoutMs: number
}

export interface HelperResult {
  /** undefined when a signal ended it (or it could not be run: see stderr). */
  exitCode: number | undefined
  stdout: string
  stderr: string
  timedOut: boolean
}

/**
 * The helper. Request fields: id, timeout (ms), program, input, the number
 * of arguments, the arguments, then `NAME=value` for each variable of the
 * environment (the only ones the program gets). Answer fields: id, exit
 * code (-1 for a signal), the signal, timed out (1/0), stdout, stderr. A
 * program that cannot be run answers 127 with the reason on its stderr.
 * Timeouts are kept to the second (perl-base's `time`).
 */
export const HelperScript = `
use strict; use IO::Select; use POSIX ();
$SIG{PIPE} = 'IGNORE'; $SIG{CHLD} = sub {};
select(STDOUT); $| = 1;
my $sel = IO::Select->new(\\*STDIN); my $open = 1; my $in = ''; my (%jobs, %pipes);
sub unhex { pack('H*', $_[0]) }
sub start {
  my @f = map { unhex($_) } split(/ /, $_[0], -1);
  my ($id, $timeout, $file, $input, $n) = splice(@f, 0, 5);
  my @args = splice(@f, 0, $n);
  my (@env) = @f;
  my ($ir, $iw, $or, $ow, $er, $ew);
  pipe($ir, $iw) && pipe($or, $ow) && pipe($er, $ew) or return answer($id, 127, 0, 0, '', "pipe: $!");
  my $pid = fork();
  return answer($id, 127, 0, 0, '', "fork: $!") unless defined $pid;
  if ($pid == 0) {
    open(STDIN, '<&', $ir); open(STDOUT, '>&', $ow); open(STDERR, '>&', $ew); $SIG{PIPE} = 'DEFAULT'; $SIG{CHLD} = 'DEFAULT';
    %ENV = map { /^([^=]*)=(.*)$/s ? ($1, $2) : () } @env;
    exec { $file } $file, @args; print STDERR "exec $file: $!\\n"; POSIX::_exit(127);
  }
  close($ir); close($ow); close($ew);
  my $off = 0; while ($off < length $input) { my $w = syswrite($iw, $input, length($input) - $off, $off); last unless $w; $off += $w }
  close($iw);
  $jobs{$pid} = {id => $id, out => '', err => '', open => 2, deadline => time + $timeout / 1000};
  for ([$or, 'out'], [$er, 'err']) { $sel->add($_->[0]); $pipes{fileno $_->[0]} = [$pid, $_->[1], $_->[0]] }
}
sub answer { my ($id, $code, $sig, $timedOut, $out, $err) = @_; print join(' ', map { unpack('H*', $_) } ($id, $code, $sig, $timedOut, $out, $err)), "\\n"; }
while ($open || %jobs) {
  my @ready = $sel->can_read(%jobs ? 0.1 : undef);
  for my $fh (@ready) {
    if (fileno($fh) == fileno(STDIN)) {
      my $r = sysread(STDIN, $in, 65536, length $in);
      if (!$r) { $sel->remove(\\*STDIN); $open = 0; next }
      while ($in =~ s/^([^\\n]*)\\n//) { start($1) }
      next;
    }
    my $p = $pipes{fileno $fh}; my $buf = '';
    my $r = sysread($fh, $buf, 65536);
    if ($r) { $jobs{$p->[0]}{$p->[1]} .= $buf; next }
    $sel->remove($fh); delete $pipes{fileno $fh}; close($fh); $jobs{$p->[0]}{open}--;
  }
  while ((my $pid = waitpid(-1, POSIX::WNOHANG())) > 0) { $jobs{$pid}{status} = $? if $jobs{$pid} }
  for my $pid (keys %jobs) {
    my $j = $jobs{$pid};
    if (!defined $j->{status} && !$j->{killed} && time > $j->{deadline}) { kill('KILL', $pid); $j->{killed} = 1 }
    next unless defined $j->{status} && $j->{open} == 0;
    my $s = $j->{status};
    answer($j->{id}, ($s & 127) ? -1 : ($s >> 8), $s & 127, $j->{killed} ? 1 : 0, $j->{out}, $j->{err});
    delete $jobs{$pid};
  }
}
`

const hex = (s: string) => Buffer.from(s, 'utf8').toString('hex')
const unhex = (s: string) => Buffer.from(s, 'hex').toString('utf8')

/** Signal numbers of the ones a helper program may end by (answers name them as execa does). */
const SignalNames: Record<number, string> = {9: 'SIGKILL', 15: 'SIGTERM', 6: 'SIGABRT', 11: 'SIGSEGV', 2: 'SIGINT'}

export class HelperRunner {
  private child?: ChildProcess
  private nextId = 1
  /** Runs asked for and not answered yet: the helper each went to, and its caller. */
  private readonly waiting = new Map<string, {child: ChildProcess; resolve: (r: HelperResult) => void}>()
  private idle?: NodeJS.Timeout
  private failed = false
  /** Runs answered by the helper (the rest went through execa). */
  helperRuns = 0

  constructor(private readonly idleMs = DefaultHelperIdleMs) {}

  /** Runs `file` with exactly `env`, `input` on its stdin; never throws for the program's failure. */
  async run(file: string, args: string[], opts: HelperRun): Promise<HelperResult> {
    const input = opts.input ?? ''
    const child = Buffer.byteLength(input) <= MaxHelperInputBytes ? this.helper() : undefined
    if (!child) return runDirectly(file, args, opts)
    const id = String(this.nextId++)
    const fields = [id, String(opts.timeoutMs), file, input, String(args.length), ...args, ...Object.entries(opts.env).map(([k, v]) => `${k}=${v}`)]
    clearTimeout(this.idle)
    return new Promise<HelperResult>((resolve) => {
      this.waiting.set(id, {child, resolve})
      this.holdOpen(child, true)
      child.stdin!.write(fields.map(hex).join(' ') + '\n')
    })
  }

  /** Tells the helper to go: it finishes the runs under way, then exits. */
  close(): void {
    clearTimeout(this.idle)
    this.child?.stdin?.end()
    this.child = undefined
  }

  /** The helper's pid while it runs (tests). */
  get pid(): number | undefined {
    return this.child?.pid
  }

  private helper(): ChildProcess | undefined {
    if (this.child) return this.child
    const perl = hostProgram(PerlProgram)
    if (this.failed || !perl.startsWith('/')) return undefined
    const child = spawn(perl, ['-e', HelperScript], {stdio: ['pipe', 'pipe', 'ignore'], env: {PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}})
    this.child = child
    child.stdout!.setEncoding('utf8')
    // Each helper's answers are lines of its own stdout (a closed helper may still be answering beside a new one).
    const answers = {text: ''}
    child.stdout!.on('data', (chunk: string) => this.read(answers, chunk))
    child.stdin!.on('error', () => undefined)
    child.once('error', () => (this.failed = true))
    child.once('exit', () => this.gone(child))
    ;(child.stdin as unknown as {unref?: () => void}).unref?.()
    this.holdOpen(child, false)
    return child
  }

  /** An idle helper does not keep vnode running (a node that is done exits, and the helper with it: its stdin closes); one with runs under way does. */
  private holdOpen(child: ChildProcess, hold: boolean): void {
    const out = child.stdout as unknown as {ref?: () => void; unref?: () => void}
    if (hold) {
      child.ref()
      out.ref?.()
    } else {
      child.unref()
      out.unref?.()
    }
  }

  private read(answers: {text: string}, chunk: string): void {
    answers.text += chunk
    let nl: number
    while ((nl = answers.text.indexOf('\n')) >= 0) {
      const [id = '', code = '', signal = '', timedOut = '', stdout = '', stderr = ''] = answers.text.slice(0, nl).split(' ').map(unhex)
      answers.text = answers.text.slice(nl + 1)
      const resolve = this.waiting.get(id)?.resolve
      this.waiting.delete(id)
      this.helperRuns++
      const exit = Number(code)
      resolve?.({exitCode: exit < 0 ? undefined : exit, stdout, stderr: exit < 0 && !stderr ? `killed by ${SignalNames[Number(signal)] ?? `signal ${signal}`}` : stderr, timedOut: timedOut === '1'})
    }
    if (this.waiting.size === 0 && this.child) {
      this.holdOpen(this.child, false)
      this.idleSoon()
    }
  }

  private idleSoon(): void {
    clearTimeout(this.idle)
    this.idle = setTimeout(() => this.close(), this.idleMs)
    this.idle.unref()
  }

  /** The helper ended: runs it had not answered end as failed (whether they ran is unknown), and the next run starts another. */
  private gone(child: ChildProcess): void {
    if (this.child === child) this.child = undefined
    for (const [id, run] of this.waiting) {
      if (run.child !== child) continue
      this.waiting.delete(id)
      run.resolve({exitCode: undefined, stdout: '', stderr: 'the helper that ran it exited', timedOut: false})
    }
  }
}

async function runDirectly(file: string, args: string[], opts: HelperRun): Promise<HelperResult> {
  const r = await execa(file, args, {input: opts.input ?? '', env: opts.env, extendEnv: false, reject: false, timeout: opts.timeoutMs})
  return {exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr), timedOut: !!r.timedOut}
}

/** The node's helper (one per vnode process: the programs it runs name no node). */
export const helpers = new HelperRunner()

import {spawn, type ChildProcess} from 'node:child_process'
import {EventEmitter} from 'node:events'
import {existsSync} from 'node:fs'
import {constants as osConstants} from 'node:os'
import {PassThrough} from 'node:stream'
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

/** The helper's one argument (the script ignores it): what `ps` shows of it, and how a node's helper is found among its children. */
export const HelperName = 'vnode-helper'

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
 * The helper. Each line is hex fields, the first the kind:
 *  - `run` id timeout(ms) program input n args... NAME=value...: runs the
 *    program with exactly that environment, the input on its stdin;
 *    answered `ran` id code(-1 for a signal) signal timedOut(1/0) stdout
 *    stderr. A program that cannot be run answers 127 with the reason on its
 *    stderr. Timeouts are kept to the second (perl-base's `time`).
 *  - `spawn` id stdoutPath stderrPath pidnsPath n argv... NAME=value...: a
 *    sandbox's monitor (bwrap behind its entry), in a session of its own,
 *    from /, its stdin /dev/null, its stdout and stderr the instance's
 *    pipes opened read-write (instance-io.ts), fd 3 its status pipe, fd 4
 *    its block pipe, fd 5 the PID namespace file when given. Answered `pid`
 *    id pid, then `status` id data for what it writes on fd 3, `closed` id
 *    when fd 3 closes, `exit` id code(-1 for a signal) signal once reaped;
 *    `failed` id reason when it could not be started.
 *  - `go` id: writes to the monitor's block pipe and closes it.
 * Once its stdin closes (vnode is gone, or done with it), the helper lets
 * monitors held at their block fd run, finishes its runs and stays until its
 * monitors have exited (reaping them).
 */
export const HelperScript = `
use strict; use IO::Handle; use IO::Select; use POSIX ();
$SIG{PIPE} = 'IGNORE';
select(STDOUT); $| = 1;
my $sel = IO::Select->new(\\*STDIN); my $open = 1; my $in = ''; my (%jobs, %pipes, %monitors, %blocks);
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
  my ($id, $stdout, $stderr, $pidns, $n, @f) = @_;
  my @argv = splice(@f, 0, $n);
  my ($sr, $sw, $br, $bw, $ns, $o, $e);
  pipe($sr, $sw) && pipe($br, $bw) or return answer('failed', $id, "pipe: $!");
  open($o, '+<', $stdout) && open($e, '+<', $stderr) or return answer('failed', $id, "open: $!");
  if ($pidns ne '') { open($ns, '<', $pidns) or return answer('failed', $id, "$pidns: $!") }
  my $pid = fork();
  return answer('failed', $id, "fork: $!") unless defined $pid;
  if ($pid == 0) {
    $SIG{PIPE} = 'DEFAULT'; $SIG{CHLD} = 'DEFAULT';
    POSIX::setsid(); chdir('/');
    my @from = map { POSIX::dup(fileno $_) } ($o, $e, $sw, $br, $ns ? $ns : ());
    open(STDIN, '<', '/dev/null');
    for my $i (0 .. $#from) { POSIX::dup2($from[$i], $i + 1) }
    POSIX::close($_) for @from;
    environment(@f);
    exec { $argv[0] } @argv; print STDERR "exec $argv[0]: $!\\n"; POSIX::_exit(127);
  }
  close($sw); close($br); close($o); close($e); close($ns) if $ns;
  $monitors{$pid} = $id; $blocks{$id} = $bw;
  $sel->add($sr); $pipes{fileno $sr} = [$pid, 'status', $sr, $id];
  answer('pid', $id, $pid);
}
sub go { my $b = delete $blocks{$_[0]}; if ($b) { syswrite($b, 'go'); close($b) } }
sub request {
  my ($kind, @f) = map { unhex($_) } split(/ /, $_[0], -1);
  if ($kind eq 'run') { run(@f) } elsif ($kind eq 'spawn') { spawn(@f) } elsif ($kind eq 'go') { go(@f) }
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
      if ($r) { answer('status', $p->[3], $buf); next }
      $sel->remove($fh); delete $pipes{fileno $fh}; close($fh); answer('closed', $p->[3]); next;
    }
    if ($r) { $jobs{$p->[0]}{$p->[1]} .= $buf; next }
    $sel->remove($fh); delete $pipes{fileno $fh}; close($fh); $jobs{$p->[0]}{open}--;
  }
  while ((my $pid = waitpid(-1, POSIX::WNOHANG())) > 0) {
    if ($jobs{$pid}) { $jobs{$pid}{status} = $? }
    elsif (defined(my $id = delete $monitors{$pid})) { go($id); answer('exit', $id, ($? & 127) ? -1 : ($? >> 8), $? & 127) }
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

const hex = (s: string) => Buffer.from(s, 'utf8').toString('hex')
const unhex = (s: string) => Buffer.from(s, 'hex').toString('utf8')
const envFields = (env: Record<string, string>) => Object.entries(env).map(([k, v]) => `${k}=${v}`)

/** A signal's name from its number (as a child process's exit names it). */
function signalName(n: number): NodeJS.Signals | undefined {
  return (Object.entries(osConstants.signals) as [NodeJS.Signals, number][]).find(([, v]) => v === n)?.[0]
}

/** What a sandbox's monitor is to its start, whether vnode's child or the helper's (sandbox/spawn.ts). */
export interface SandboxMonitor {
  readonly pid?: number
  readonly exitCode: number | null
  readonly signalCode: NodeJS.Signals | null
  kill(signal?: NodeJS.Signals | number): boolean
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown
  once(event: 'error', listener: (error: Error) => void): unknown
  unref(): void
}

export interface HelperSpawn {
  argv: string[]
  env: Record<string, string>
  /** The instance's output pipes (opened read-write for it, as instance-io.ts does). */
  stdout: string
  stderr: string
  /** A PID namespace file for fd 5. */
  pidns?: string
}

/** A monitor started by the helper: its pid, what it writes on its status fd, its exit as the helper reaped it. */
export class HelperMonitor extends EventEmitter implements SandboxMonitor {
  pid?: number
  exitCode: number | null = null
  signalCode: NodeJS.Signals | null = null
  /** What the monitor writes on its fd 3, ended when that closes. */
  readonly status = new PassThrough()

  constructor(
    readonly id: string,
    private readonly release: (m: HelperMonitor) => void,
    private readonly send: (fields: string[]) => void,
  ) {
    super()
  }

  /** Lets it run: its block fd gets its word. */
  go(): void {
    this.send(['go', this.id])
  }

  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (this.pid === undefined || this.exitCode !== null || this.signalCode !== null) return false
    try {
      process.kill(this.pid, signal)
      return true
    } catch {
      return false
    }
  }

  /** It no longer keeps vnode running (a child process's unref). */
  unref(): void {
    this.release(this)
  }

  ended(code: number | null, signal: NodeJS.Signals | null): void {
    this.exitCode = code
    this.signalCode = signal
    this.release(this)
    this.emit('exit', code, signal)
  }
}

/** How often a monitor whose helper is gone is looked for in /proc. */
const OrphanLookMs = 1_000

export class HelperRunner {
  private child?: ChildProcess
  private nextId = 1
  /** Runs asked for and not answered yet: the helper each went to, and its caller. */
  private readonly waiting = new Map<string, {child: ChildProcess; resolve: (r: HelperResult) => void}>()
  /** Monitors started and not exited: the helper each belongs to, and whether it keeps vnode running. */
  private readonly monitors = new Map<string, {child: ChildProcess; monitor: HelperMonitor; started: (m: HelperMonitor | Error) => void; held: boolean}>()
  private idle?: NodeJS.Timeout
  private failed = false
  /** close() was asked for while monitors ran. */
  private closing = false
  /** Runs answered by the helper (the rest went through execa). */
  helperRuns = 0

  constructor(private readonly idleMs = DefaultHelperIdleMs) {}

  /** Whether spawns can go through the helper (perl is there and the helper has not failed to start). */
  get canSpawn(): boolean {
    return !this.failed && hostProgram(PerlProgram).startsWith('/')
  }

  /** Runs `file` with exactly `env`, `input` on its stdin; never throws for the program's failure. */
  async run(file: string, args: string[], opts: HelperRun): Promise<HelperResult> {
    const input = opts.input ?? ''
    const child = Buffer.byteLength(input) <= MaxHelperInputBytes ? this.helper() : undefined
    if (!child) return runDirectly(file, args, opts)
    const id = String(this.nextId++)
    clearTimeout(this.idle)
    return new Promise<HelperResult>((resolve) => {
      this.waiting.set(id, {child, resolve})
      this.hold()
      this.write(child, ['run', id, String(opts.timeoutMs), file, input, String(args.length), ...args, ...envFields(opts.env)])
    })
  }

  /** Starts a sandbox's monitor from the helper; rejects when it cannot be started (the reason). */
  spawn(s: HelperSpawn): Promise<HelperMonitor> {
    const child = this.helper()
    if (!child) return Promise.reject(new Error('no helper'))
    const id = String(this.nextId++)
    clearTimeout(this.idle)
    return new Promise<HelperMonitor>((resolve, reject) => {
      const monitor = new HelperMonitor(
        id,
        (m) => this.unhold(m),
        (fields) => this.write(child, fields),
      )
      this.monitors.set(id, {child, monitor, held: true, started: (m) => (m instanceof Error ? reject(m) : resolve(m))})
      this.hold()
      this.write(child, ['spawn', id, s.stdout, s.stderr, s.pidns ?? '', String(s.argv.length), ...s.argv, ...envFields(s.env)])
    })
  }

  /**
   * Lets the helper go: at once when it has no monitor (it finishes the
   * runs under way, then exits), else once its last monitor has exited (its
   * stdin's end lets monitors still held at their block fd run, as vnode's
   * own end does).
   */
  close(): void {
    clearTimeout(this.idle)
    if (this.monitors.size > 0) {
      this.closing = true
      return
    }
    this.closing = false
    this.child?.stdin?.end()
    this.child = undefined
  }

  /** The helper's pid while it runs (tests). */
  get pid(): number | undefined {
    return this.child?.pid
  }

  private write(child: ChildProcess, fields: string[]): void {
    child.stdin!.write(fields.map(hex).join(' ') + '\n')
  }

  private helper(): ChildProcess | undefined {
    if (this.child) return this.child
    if (!this.canSpawn) return undefined
    // A session of its own: a terminal's ^C or hangup is vnode's to act on (it stops its pods, whose exits the helper reports).
    const child = spawn(hostProgram(PerlProgram), ['-e', HelperScript, HelperName], {
      stdio: ['pipe', 'pipe', 'ignore'],
      env: {PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'},
      detached: true,
    })
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

  /** Whether anything under way keeps vnode running: a run, a spawn not answered yet, a monitor not unref'd. */
  private get holding(): boolean {
    return this.waiting.size > 0 || [...this.monitors.values()].some((m) => m.held)
  }

  private hold(): void {
    for (const c of new Set([...[...this.waiting.values()].map((w) => w.child), ...[...this.monitors.values()].map((m) => m.child)])) this.holdOpen(c, true)
  }

  private unhold(m: HelperMonitor): void {
    const entry = this.monitors.get(m.id)
    if (entry) entry.held = false
    this.settle()
  }

  /** An idle helper does not keep vnode running (a node that is done exits, and the helper with it: its stdin closes); one with work under way does. */
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
      const [kind = '', id = '', ...f] = answers.text.slice(0, nl).split(' ').map(unhex)
      answers.text = answers.text.slice(nl + 1)
      if (kind === 'ran') this.ran(id, f)
      else this.monitorSaid(kind, id, f)
    }
    this.settle()
  }

  private ran(id: string, [code = '', signal = '', timedOut = '', stdout = '', stderr = '']: string[]): void {
    const resolve = this.waiting.get(id)?.resolve
    this.waiting.delete(id)
    this.helperRuns++
    const exit = Number(code)
    const killed = exit < 0 && !stderr ? `killed by ${signalName(Number(signal)) ?? `signal ${signal}`}` : stderr
    resolve?.({exitCode: exit < 0 ? undefined : exit, stdout, stderr: killed, timedOut: timedOut === '1'})
  }

  private monitorSaid(kind: string, id: string, [first = '', second = '']: string[]): void {
    const entry = this.monitors.get(id)
    if (!entry) return
    const m = entry.monitor
    if (kind === 'pid') {
      m.pid = Number(first)
      entry.started(m)
    } else if (kind === 'failed') {
      this.monitors.delete(id)
      entry.started(new Error(first))
    } else if (kind === 'status') m.status.write(first)
    else if (kind === 'closed') m.status.end()
    else if (kind === 'exit') {
      this.monitors.delete(id)
      const code = Number(first)
      m.status.end()
      m.ended(code < 0 ? null : code, code < 0 ? (signalName(Number(second)) ?? null) : null)
    }
  }

  /** Nothing under way: the helper no longer keeps vnode running, and goes once idle long enough. */
  private settle(): void {
    if (this.holding || !this.child) return
    this.holdOpen(this.child, false)
    if (this.monitors.size > 0) return
    if (this.closing) this.close()
    else this.idleSoon()
  }

  private idleSoon(): void {
    clearTimeout(this.idle)
    this.idle = setTimeout(() => this.close(), this.idleMs)
    this.idle.unref()
  }

  /**
   * The helper ended: runs it had not answered end as failed (whether they
   * ran is unknown); a spawn it had not answered fails; a monitor it started
   * lives on without it, so its end is looked for in /proc (its exit status
   * unknown, as for a process a previous vnode started). The next run
   * starts another helper.
   */
  private gone(child: ChildProcess): void {
    if (this.child === child) this.child = undefined
    for (const [id, run] of this.waiting) {
      if (run.child !== child) continue
      this.waiting.delete(id)
      run.resolve({exitCode: undefined, stdout: '', stderr: 'the helper that ran it exited', timedOut: false})
    }
    for (const [id, entry] of this.monitors) {
      if (entry.child !== child) continue
      this.monitors.delete(id)
      const m = entry.monitor
      if (m.pid === undefined) entry.started(new Error('the helper exited'))
      else watchOrphan(m)
    }
    this.settle()
  }
}

function watchOrphan(m: HelperMonitor): void {
  m.status.end()
  const look = setInterval(() => {
    if (existsSync(`/proc/${m.pid}`)) return
    clearInterval(look)
    m.ended(null, null)
  }, OrphanLookMs)
  look.unref()
}

async function runDirectly(file: string, args: string[], opts: HelperRun): Promise<HelperResult> {
  const r = await execa(file, args, {input: opts.input ?? '', env: opts.env, extendEnv: false, reject: false, timeout: opts.timeoutMs})
  return {exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr), timedOut: !!r.timedOut}
}

/** The node's helper (one per vnode process: the programs it runs name no node). */
export const helpers = new HelperRunner()

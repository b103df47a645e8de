import {existsSync, readFileSync} from 'node:fs'

/** Large enough that a file rewritten in place would be caught half-written. */
export const Filler = 'x'.repeat(256 * 1024)
/** A version's content: the version at both ends, marked, so a torn read shows as ends that differ or a wrong length. */
export const versioned = (v: string) => `<<${v}\n${Filler}\n${v}>>`

/**
 * Reads each of $FILES (relative to $VNODE_VOLUME_ROOT) in a tight loop and
 * writes to $OUT, atomically, every distinct value it saw per file in order
 * (a version, or "TORN", or an error code), and $ENVV as it was at start.
 */
export const LOOP_READER = `const fs=require('fs'),p=require('path');const files=process.env.FILES.split(',');const seen={};const counts={reads:0};
for(const f of files)seen[f]=[];
function val(f){let t;try{t=fs.readFileSync(p.join(process.env.VNODE_VOLUME_ROOT,f),'utf8')}catch(e){return 'ERR '+e.code}
if(!t.startsWith('<<'))return t;const a=t.slice(2,-2).split('\\n');if(!t.endsWith('>>')||a.length!==3||a[0]!==a[2]||a[1].length!==${Filler.length})return 'TORN';return a[0]}
function save(){fs.writeFileSync(process.env.OUT+'.tmp',JSON.stringify({seen,env:process.env.ENVV,reads:counts.reads}));fs.renameSync(process.env.OUT+'.tmp',process.env.OUT)}
let last=0;function loop(){let changed=false;for(const f of files){const v=val(f);counts.reads++;const s=seen[f];if(s[s.length-1]!==v){s.push(v);changed=true}}
if(changed||Date.now()-last>500){save();last=Date.now()}setImmediate(loop)}loop()`

export interface Seen {
  seen: Record<string, string[]>
  env: string
  reads: number
}

/** What the reader wrote to out, if anything yet. */
export function readSeen(out: string): Seen | undefined {
  return existsSync(out) ? (JSON.parse(readFileSync(out, 'utf8')) as Seen) : undefined
}

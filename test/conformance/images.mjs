// The reference node's images, made locally (no registry is reachable): a
// busybox image from Debian's busybox-static and a pause image compiled from
// the kubelet's own pause.c. Each is a one-layer docker-archive tar with one
// tag (with two tags the CRI may report the other one as `image`).
import {createHash} from 'node:crypto'
import {chmod, copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'

export const BusyboxImage = 'docker.io/library/busybox:conformance'
export const PauseImage = 'registry.k8s.io/pause:3.10'
export const HostBusybox = '/bin/busybox'
/** The image's PATH, as busybox's own image sets it. */
export const ImagePath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')

async function dockerArchive(rootfs, out, tag, config) {
  const work = await mkdtemp(join(tmpdir(), 'vnode-image-'))
  try {
    const layer = join(work, 'layer.tar')
    await execa('tar', ['--numeric-owner', '--owner=0', '--group=0', '--sort=name', '--mtime=@0', '-C', rootfs, '-cf', layer, '.'])
    const diffId = `sha256:${sha256(await readFile(layer))}`
    const cfg = JSON.stringify({architecture: 'amd64', os: 'linux', config, rootfs: {type: 'layers', diff_ids: [diffId]}})
    const cfgName = `${sha256(cfg)}.json`
    await writeFile(join(work, cfgName), cfg)
    await writeFile(join(work, 'manifest.json'), JSON.stringify([{Config: cfgName, RepoTags: [tag], Layers: ['layer.tar']}]))
    await execa('tar', ['-C', work, '-cf', out, 'manifest.json', cfgName, 'layer.tar'])
  } finally {
    await rm(work, {recursive: true, force: true})
  }
}

/** busybox with its applet links, /etc/passwd, /etc/group and /tmp. */
export async function makeBusyboxImage(out) {
  const root = await mkdtemp(join(tmpdir(), 'vnode-busybox-'))
  try {
    for (const d of ['bin', 'etc', 'tmp', 'root', 'usr/bin', 'sbin', 'usr/sbin', 'var', 'proc', 'sys', 'dev']) await mkdir(join(root, d), {recursive: true})
    await chmod(join(root, 'tmp'), 0o1777)
    await copyFile(HostBusybox, join(root, 'bin', 'busybox'))
    await chmod(join(root, 'bin', 'busybox'), 0o755)
    const {stdout} = await execa(HostBusybox, ['--list'])
    for (const applet of stdout.split('\n').filter((a) => a && a !== 'busybox')) {
      await symlink('/bin/busybox', join(root, 'bin', applet)).catch(() => undefined)
    }
    await writeFile(join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n')
    await writeFile(join(root, 'etc', 'group'), 'root:x:0:\nnobody:x:65534:\n')
    await dockerArchive(root, out, BusyboxImage, {Env: [`PATH=${ImagePath}`], Entrypoint: [HostBusybox], Cmd: ['sh']})
  } finally {
    await rm(root, {recursive: true, force: true})
  }
}

/** The pause image from k8s.io/kubernetes/build/pause/linux/pause.c, user 65535. */
export async function makePauseImage(out, kubernetesVersion) {
  const {stdout: modcache} = await execa('go', ['env', 'GOMODCACHE'])
  const source = join(modcache, `k8s.io/kubernetes@${kubernetesVersion}`, 'build', 'pause', 'linux', 'pause.c')
  const root = await mkdtemp(join(tmpdir(), 'vnode-pause-'))
  try {
    await execa('gcc', ['-Os', '-Wall', '-static', '-DVERSION=v3.10', '-o', join(root, 'pause'), source])
    await dockerArchive(root, out, PauseImage, {User: '65535:65535', Entrypoint: ['/pause']})
  } finally {
    await rm(root, {recursive: true, force: true})
  }
}

/**
 * The image map vnode gets for the corpus: the same image names run the host's
 * busybox, with the image's ENTRYPOINT and CMD.
 */
export function vnodeImageMap() {
  return `images:\n  "docker.io/library/busybox*":\n    command: [${HostBusybox}]\n    args: [sh]\n    env: {PATH: "${ImagePath}"}\n`
}

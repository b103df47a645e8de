import type {V1Container} from '@kubernetes/client-node'
import {ImageMap, type ImageEntry, type ImageRule} from './image-map.js'

/**
 * The built-in image map, below any `--images` file: what the images people
 * use every day run as on a host without images.
 *
 * Base images have no ENTRYPOINT, so the container's args (kubectl puts
 * `kubectl run x --image=busybox -- sh -c '...'` there) are the whole
 * command, and their CMD when it has none. Their programs are the host's,
 * found on the container's PATH.
 *
 * Server images map to the host's program when it is installed, in the
 * foreground, with its output on the container's stdout and stderr and its
 * files (config, pid, temp) under the container's image directory; a
 * program that is not installed fails the start with CreateContainerError.
 */

/** Images without an ENTRYPOINT, with their CMD as the image declares it. */
const BaseImages: Array<[string, string[]]> = [
  ['busybox', ['sh']],
  ['alpine', ['/bin/sh']],
  ['debian', ['bash']],
  ['ubuntu', ['/bin/bash']],
  ['fedora', ['/bin/bash']],
  ['centos', ['/bin/bash']],
  ['rockylinux', ['/bin/bash']],
  ['almalinux', ['/bin/bash']],
  ['archlinux', ['/usr/bin/bash']],
  ['bash', ['bash']],
  ['python', ['python3']],
  ['node', ['node']],
  ['golang', ['bash']],
  ['rust', ['bash']],
  ['ruby', ['irb']],
  ['perl', ['perl', '-de0']],
  ['php', ['php', '-a']],
  ['openjdk', ['jshell']],
  ['eclipse-temurin', ['jshell']],
  ['gcc', ['bash']],
  ['buildpack-deps', ['bash']],
]

/** The port a server image listens on: the container's first TCP containerPort, else the image's own. */
export function serverPort(container: V1Container, imagePort: number): number {
  const p = (container.ports ?? []).find((x) => (x.protocol ?? 'TCP') === 'TCP')
  return p?.containerPort ?? imagePort
}

/** nginx's own default port is 80; a user who cannot bind it gets 8080 (the unprivileged images' choice). */
function nginxDefaultPort(): number {
  return process.getuid?.() === 0 ? 80 : 8080
}

/**
 * nginx in the foreground with a config of its own: it listens on the
 * container's port, logs to stdout/stderr and keeps its pid and temp files
 * in the image directory, so it writes nothing outside the pod's directories.
 */
export function nginxConfig(dir: string, port: number): string {
  return `# The config vnode's built-in image map gives the image "nginx".
worker_processes 1;
pid ${dir}/nginx.pid;
error_log stderr notice;
events { worker_connections 512; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log /dev/stdout;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  server {
    listen ${port};
    location / {
      root /usr/share/nginx/html;
      index index.html;
    }
  }
}
`
}

const Dir = '$(VNODE_IMAGE_DIR)'

const ServerImages: Array<[string, ImageEntry]> = [
  [
    'nginx',
    {
      // -e: the error log before the config is read; -p: the prefix for anything relative.
      command: ['nginx', '-e', 'stderr', '-p', Dir, '-c', `${Dir}/nginx.conf`, '-g', 'daemon off;'],
      files: (c) => ({'nginx.conf': nginxConfig(Dir, serverPort(c, nginxDefaultPort()))}),
    },
  ],
  ['redis', {command: ['redis-server'], args: ['--dir', Dir, '--save', '', '--appendonly', 'no']}],
  ['valkey/valkey', {command: ['valkey-server'], args: ['--dir', Dir, '--save', '', '--appendonly', 'no']}],
  ['memcached', {command: ['memcached'], args: ['-u', 'nobody']}],
  ['mongo', {command: ['mongod'], args: ['--bind_ip_all', '--dbpath', Dir]}],
]

/** The built-in map: exact image names (any tag or digest, Docker Hub's library/ prefix or not). */
export function defaultImageMap(): ImageMap {
  const rules: ImageRule[] = [...BaseImages.map(([pattern, cmd]): ImageRule => ({pattern, entry: {args: cmd}})), ...ServerImages.map(([pattern, entry]): ImageRule => ({pattern, entry}))]
  return new ImageMap(rules, "vnode's built-in image map", undefined, true)
}

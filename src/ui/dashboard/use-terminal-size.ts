import {useStdout} from 'ink'
import {useEffect, useState} from 'react'

export const DefaultColumns = 100
export const DefaultRows = 30

/** The terminal's size, following resizes (Ink 6 has no hook of its own for it). */
export function useTerminalSize(): {columns: number; rows: number} {
  const {stdout} = useStdout()
  const read = () => ({columns: stdout.columns || DefaultColumns, rows: stdout.rows || DefaultRows})
  const [size, setSize] = useState(read)
  useEffect(() => {
    const onResize = () => setSize(read())
    stdout.on('resize', onResize)
    return () => {
      stdout.off('resize', onResize)
    }
  }, [stdout])
  return size
}

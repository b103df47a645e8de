import type {DashboardModel, PodView, SortKey} from './store.js'
import {type Column, Table, type TableRow} from './Table.js'

const Columns: (Column & {sort?: SortKey})[] = [
  {title: 'NAMESPACE', flex: true, sort: 'namespace'},
  {title: 'NAME', flex: true, sort: 'name'},
  {title: 'READY'},
  {title: 'STATUS', sort: 'status'},
  {title: 'RESTARTS', sort: 'restarts'},
  {title: 'AGE', sort: 'age', align: 'right'},
  {title: 'PID', align: 'right'},
  {title: 'CPU', sort: 'cpu', align: 'right'},
  {title: 'MEM', sort: 'mem', align: 'right'},
]

export function podTableRow(p: PodView): TableRow {
  return {key: p.uid, tone: p.tone, cells: [p.namespace, p.name, p.ready, p.status, p.restarts, p.age, p.pid, p.cpu, p.mem]}
}

export interface PodTableProps {
  model: Pick<DashboardModel, 'rows' | 'sort'>
  selected: number
  width: number
  height: number
}

/** The pods of this node: kubectl's columns plus the process view (PID, CPU, MEM), coloured by state. */
export function PodTable({model, selected, width, height}: PodTableProps) {
  const sortColumn = Columns.findIndex((c) => c.sort === model.sort.key)
  return (
    <Table
      columns={Columns}
      rows={model.rows.map(podTableRow)}
      width={width}
      height={height}
      selected={model.rows.length ? selected : undefined}
      sortColumn={sortColumn}
      descending={model.sort.descending}
      empty="No pods on this node yet."
    />
  )
}

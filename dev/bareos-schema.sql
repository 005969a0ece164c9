-- Bareos director catalog tables read by catalog-rebuild, as in the Bareos PostgreSQL DDL
-- (core/src/cats/ddl/creates/postgresql.sql): a subset of the tables, lower-case column
-- names as PostgreSQL folds them. Used by the fixture generator (scripts/gen-bareos.ts).
--
-- Like real Bareos there are NO foreign keys: job.clientid / poolid / filesetid /
-- priorjobid may be 0 or point at rows that no longer exist (pruned); join with LEFT JOIN.
-- Timestamps are the director's naive local wall-clock time; jobtdate (epoch seconds) is
-- the only zone-free time.

CREATE TABLE IF NOT EXISTS client (
    clientid          serial      NOT NULL,
    name              text        NOT NULL,
    uname             text        NOT NULL DEFAULT '',
    autoprune         smallint    DEFAULT 0,
    fileretention     bigint      DEFAULT 0,
    jobretention      bigint      DEFAULT 0,
    PRIMARY KEY (clientid),
    UNIQUE (name)
);

CREATE TABLE IF NOT EXISTS pool (
    poolid              serial      NOT NULL,
    name                text        NOT NULL,
    numvols             integer     DEFAULT 0,
    maxvols             integer     DEFAULT 0,
    useonce             smallint    DEFAULT 0,
    usecatalog          smallint    DEFAULT 0,
    acceptanyvolume     smallint    DEFAULT 0,
    volretention        bigint      DEFAULT 0,
    voluseduration      bigint      DEFAULT 0,
    maxvoljobs          integer     DEFAULT 0,
    maxvolfiles         integer     DEFAULT 0,
    maxvolbytes         bigint      DEFAULT 0,
    autoprune           smallint    DEFAULT 0,
    recycle             smallint    DEFAULT 0,
    actiononpurge       smallint    DEFAULT 0,
    pooltype            text        CHECK (pooltype IN ('Backup', 'Copy', 'Cloned', 'Archive', 'Migration', 'Scratch')),
    labeltype           integer     DEFAULT 0,
    labelformat         text        NOT NULL DEFAULT '*',
    enabled             smallint    DEFAULT 1,
    scratchpoolid       integer     DEFAULT 0,
    recyclepoolid       integer     DEFAULT 0,
    nextpoolid          integer     DEFAULT 0,
    migrationhighbytes  bigint      DEFAULT 0,
    migrationlowbytes   bigint      DEFAULT 0,
    migrationtime       bigint      DEFAULT 0,
    PRIMARY KEY (poolid)
);

CREATE INDEX IF NOT EXISTS pool_name_idx ON pool (name);

-- One row per configuration version of a fileset: the name is not unique.
CREATE TABLE IF NOT EXISTS fileset (
    filesetid         serial      NOT NULL,
    fileset           text        NOT NULL,
    filesettext       text        DEFAULT '',
    md5               text        NOT NULL DEFAULT '',
    createtime        timestamp without time zone NOT NULL,
    PRIMARY KEY (filesetid)
);

CREATE INDEX IF NOT EXISTS fileset_name_idx ON fileset (fileset);

CREATE TABLE IF NOT EXISTS job (
    jobid             serial      NOT NULL,
    job               text        NOT NULL,
    name              text        NOT NULL,
    type              char(1)     NOT NULL,
    level             char(1)     NOT NULL,
    clientid          integer     DEFAULT 0,
    jobstatus         char(1)     NOT NULL,
    schedtime         timestamp without time zone,
    starttime         timestamp without time zone,
    endtime           timestamp without time zone,
    realendtime       timestamp without time zone,
    jobtdate          bigint      DEFAULT 0,
    volsessionid      integer     DEFAULT 0,
    volsessiontime    integer     DEFAULT 0,
    jobfiles          integer     DEFAULT 0,
    jobbytes          bigint      DEFAULT 0,
    readbytes         bigint      DEFAULT 0,
    joberrors         integer     DEFAULT 0,
    jobmissingfiles   smallint    DEFAULT 0,
    poolid            integer     DEFAULT 0,
    filesetid         integer     DEFAULT 0,
    priorjobid        integer     DEFAULT 0,
    purgedfiles       smallint    DEFAULT 0,
    hasbase           smallint    DEFAULT 0,
    hascache          smallint    DEFAULT 0,
    reviewed          smallint    DEFAULT 0,
    comment           text,
    PRIMARY KEY (jobid)
);

CREATE INDEX IF NOT EXISTS job_name_idx ON job (name);

package bench

import "time"

// Prices are the list prices the cost model uses (USD, us-east-1). The
// defaults and the dates they were read are in docs/performance/cost.md; every
// one is a flag of `strand bench`.
type Prices struct {
	ExpressPutPer1000  float64 // S3 Express One Zone PUT
	ExpressUploadPerGB float64 // S3 Express One Zone data upload, per GB of request body
	ExpressUploadFreeB int64   // bytes of each request not charged for upload (0: every byte)
	ExpressStorageGBMo float64 // S3 Express One Zone storage, GB-month
	CrossAZPerGB       float64 // transfer to a directory bucket in another zone, per GB (per copy)
	StandardPutPer1000 float64 // S3 Standard PUT
	StandardStorageGBM float64 // S3 Standard storage, GB-month
	DynamoWRUPerM      float64 // DynamoDB on-demand, per million write request units
	DynamoRRUPerM      float64 // DynamoDB on-demand, per million read request units
	LambdaPerM         float64 // Lambda, per million invocations
	LambdaGBSecond     float64 // Lambda, per GB-second (x86)
	SQSFIFOPerM        float64 // SQS FIFO, per million requests
	StandardGetPer1000 float64 // S3 Standard GET
	ExpressGetPer1000  float64 // S3 Express One Zone GET
	ExpressRetrPerGB   float64 // S3 Express One Zone data retrieval, per GB of response body

	// Model parameters, not prices.
	TransitWindow     time.Duration // how long a slot lives before trim (storage)
	AbsorbSeconds     float64       // duration of one absorb invocation
	AbsorbMemoryGB    float64       // its memory size
	SettledObjectMiB  float64       // settled object size: settle PUTs per GB = 1024/this
	SQSRequestsPerEvt float64       // send + receive + delete per release event
}

// DefaultPrices are the us-east-1 list prices as read in May 2026 from
// the AWS pricing pages and FAQs (S3 Express One Zone as repriced in April
// 2025; DynamoDB on-demand as repriced in November 2024).
func DefaultPrices() Prices {
	return Prices{
		ExpressPutPer1000:  0.00113,
		ExpressUploadPerGB: 0.0032,
		ExpressStorageGBMo: 0.11,
		CrossAZPerGB:       0.01,
		StandardPutPer1000: 0.005,
		StandardStorageGBM: 0.023,
		DynamoWRUPerM:      0.625,
		DynamoRRUPerM:      0.125,
		LambdaPerM:         0.20,
		LambdaGBSecond:     0.0000166667,
		SQSFIFOPerM:        0.50,
		StandardGetPer1000: 0.0004,
		ExpressGetPer1000:  0.00003,
		ExpressRetrPerGB:   0.0006,
		TransitWindow:      time.Minute,
		AbsorbSeconds:      0.1,
		AbsorbMemoryGB:     0.5,
		SettledObjectMiB:   8,
		SQSRequestsPerEvt:  3,
	}
}

// Cost is dollars per GB ingested (GB = 2^30 bytes of record bodies), by
// line item.
type Cost struct {
	ChainPuts    float64 `json:"chain_puts"`
	ChainUpload  float64 `json:"chain_upload"`
	CrossAZ      float64 `json:"cross_az"`
	TransitStore float64 `json:"transit_storage"`
	Metastore    float64 `json:"metastore"`
	Lambda       float64 `json:"lambda_sqs"`
	SettlePuts   float64 `json:"settle_puts_modelled"`
	// IndexPuts: the pass index objects the absorb put (S3 Standard PUTs
	// in the settled bucket), with Config.PassIndex.
	IndexPuts float64 `json:"index_puts,omitempty"`
	// Settle, with settle in the measured window (Config.SettleEvery):
	// SettlePuts is then measured (its PUTs and LISTs in the settled
	// bucket: runs, packs, per-stream objects), and Gets prices the GETs
	// absorb and settle made of the chain buckets (the class's price) and
	// of the settled bucket (Standard).
	SettleMeasured bool    `json:"settle_measured,omitempty"`
	Gets           float64 `json:"gets,omitempty"`
	Total          float64 `json:"total"`
	MetastorePerH  float64 `json:"metastore_usd_per_hour"`
	// MetastoreShare is Metastore / Total.
	MetastoreShare float64 `json:"metastore_share"`
}

// Counted is what a run counted inside its measured window.
type Counted struct {
	GB          float64 // record body bytes acked, in GiB
	Seconds     float64
	ChainPuts   int64   // PutIfAbsent calls on chain buckets (every copy)
	ChainBytes  int64   // bytes those PUTs carried
	ChainPutsOv int64   // bytes above the free portion, summed per request
	K           int     // copies per slot
	WRU, RRU    float64 // DynamoDB request units of the metastore calls
	Passes      int64   // absorb passes (BeginAbsorb calls): Lambda invocations
	IndexPuts   int64   // pass index objects put (S3 Standard), with the pass index
	// With settle in the window: its PUTs and LISTs (S3 Standard), and the
	// GETs of the chain buckets and of the settled bucket.
	SettleMeasured         bool
	SettlePuts             int64
	ChainGets, SettledGets int64
}

func (p Prices) cost(express bool, n Counted) Cost {
	var c Cost
	if n.GB <= 0 {
		return c
	}
	per := func(usd float64) float64 { return usd / n.GB }
	const gib = float64(1 << 30)
	if express {
		c.ChainPuts = per(float64(n.ChainPuts) * p.ExpressPutPer1000 / 1000)
		c.ChainUpload = per(float64(n.ChainPutsOv) / gib * p.ExpressUploadPerGB)
		if n.K > 1 {
			c.CrossAZ = per(float64(n.ChainBytes) / gib * float64(n.K-1) / float64(n.K) * p.CrossAZPerGB)
		}
		c.TransitStore = per(float64(n.ChainBytes) / gib * p.ExpressStorageGBMo * p.TransitWindow.Seconds() / (30 * 24 * 3600))
	} else {
		c.ChainPuts = per(float64(n.ChainPuts) * p.StandardPutPer1000 / 1000)
		c.TransitStore = per(float64(n.ChainBytes) / gib * p.StandardStorageGBM * p.TransitWindow.Seconds() / (30 * 24 * 3600))
	}
	meta := n.WRU*p.DynamoWRUPerM/1e6 + n.RRU*p.DynamoRRUPerM/1e6
	c.Metastore = per(meta)
	if n.Seconds > 0 {
		c.MetastorePerH = meta / n.Seconds * 3600
	}
	inv := float64(n.Passes)
	c.Lambda = per(inv*p.LambdaPerM/1e6 + inv*p.AbsorbSeconds*p.AbsorbMemoryGB*p.LambdaGBSecond + inv*p.SQSRequestsPerEvt*p.SQSFIFOPerM/1e6)
	switch {
	case n.SettleMeasured:
		c.SettleMeasured = true
		c.SettlePuts = per(float64(n.SettlePuts) * p.StandardPutPer1000 / 1000)
		getPrice := p.StandardGetPer1000
		if express {
			getPrice = p.ExpressGetPer1000
		}
		c.Gets = per(float64(n.ChainGets)*getPrice/1000 + float64(n.SettledGets)*p.StandardGetPer1000/1000)
	case p.SettledObjectMiB > 0:
		c.SettlePuts = 1024 / p.SettledObjectMiB * p.StandardPutPer1000 / 1000
	}
	c.IndexPuts = per(float64(n.IndexPuts) * p.StandardPutPer1000 / 1000)
	c.Total = c.ChainPuts + c.ChainUpload + c.CrossAZ + c.TransitStore + c.Metastore + c.Lambda + c.SettlePuts + c.IndexPuts + c.Gets
	if c.Total > 0 {
		c.MetastoreShare = c.Metastore / c.Total
	}
	return c
}

// naiveCost is the baseline's dollars per GB: one PUT per append to one
// bucket of the class, one DynamoDB item write (1 WRU) per append.
func (p Prices) naiveCost(express bool, puts int64, bytes int64, writes int64, gb float64) Cost {
	var c Cost
	if gb <= 0 {
		return c
	}
	if express {
		c.ChainPuts = float64(puts) * p.ExpressPutPer1000 / 1000 / gb
		c.ChainUpload = float64(max(0, bytes-int64(puts)*p.ExpressUploadFreeB)) / float64(1<<30) * p.ExpressUploadPerGB / gb
	} else {
		c.ChainPuts = float64(puts) * p.StandardPutPer1000 / 1000 / gb
	}
	c.Metastore = float64(writes) * p.DynamoWRUPerM / 1e6 / gb
	c.Total = c.ChainPuts + c.ChainUpload + c.Metastore
	return c
}

// ReadCost is dollars per GiB of record bodies read, by line item.
type ReadCost struct {
	ChainGets   float64 `json:"chain_gets"`   // GETs of transit slots (the class's price)
	Retrieval   float64 `json:"retrieval"`    // S3 Express per-GB retrieval of those GETs
	SettledGets float64 `json:"settled_gets"` // GETs of settled objects (S3 Standard)
	Metastore   float64 `json:"metastore"`    // reads as DynamoDB read request units
	Total       float64 `json:"total"`
}

// readCost prices a read of gib GiB of bodies that made chainGets GETs
// returning chainBytes from transit slots, settledGets GETs of settled
// objects, and rru metastore read units. Express retrieval is charged on
// every byte fetched above the free portion per request (approximated
// here as every byte when ExpressUploadFreeB is 0, the default).
func (p Prices) readCost(express bool, gib float64, chainGets, chainBytes, settledGets int64, rru float64) ReadCost {
	var c ReadCost
	if gib <= 0 {
		return c
	}
	if express {
		c.ChainGets = float64(chainGets) * p.ExpressGetPer1000 / 1000 / gib
		c.Retrieval = float64(max(0, chainBytes-chainGets*p.ExpressUploadFreeB)) / (1 << 30) * p.ExpressRetrPerGB / gib
	} else {
		c.ChainGets = float64(chainGets) * p.StandardGetPer1000 / 1000 / gib
	}
	c.SettledGets = float64(settledGets) * p.StandardGetPer1000 / 1000 / gib
	c.Metastore = rru * p.DynamoRRUPerM / 1e6 / gib
	c.Total = c.ChainGets + c.Retrieval + c.SettledGets + c.Metastore
	return c
}
